"""A recall a prompt cache can reuse: how much of each turn's ``context`` a provider serves
from its cache, in recall's order and in the order before it (issue "Memory an operator can
steer", part 3).

Replays LoCoMo conversations (``../shared/data/locomo``, via ``tools.replay``'s loaders) turn
by turn through the local stack with ``tools.scripted_model`` as language and embedding model,
as an agent loop does (``tools.replay.agent_steps``): for each user message, ``recall`` with
that message as the query, then the message and the replies after it as one ``events`` call.
Two modes (``MODES``), each in a store of its own: ``thread``, each conversation one session
(an assistant keeping one thread per user: it outgrows ``summarize_after``, 40, and folds as
in service), and ``daily``, each LoCoMo session a session of its own (22 messages median, so
seldom a fold). After each LoCoMo session the session is extracted (``POST .../extract``) and
the replay waits for the run, so later turns recall the memories kept from earlier ones.

Each turn's context is compared with the previous turn's of the same session, in three
layouts of the same recall (``contexts``, rendered by ``memories.recall.render_context``):

- recall's: header, profile, summary, recent messages, then the memories relevant to this
  query, with the recent messages of ``sessions.window`` (whose first message stays put);
- recall's order with the older window (the newest 40 messages, which slides by one a turn
  once a session outgrows it, until its fold lands);
- the one before (7cd5664): header, summary, memories, then the recent messages, with the
  older window (the profile, which that layout lacked, put first, which favours it);

and measured as:

- prefix share: the bytes of the turn's context that are a prefix of the previous turn's
  context, over its bytes (``prefix_share``); the target is a median of at least 0.8 over
  turns without a fold (a fold rewrites the summary and drops messages: a new prefix) in the
  ``thread`` mode;
- OpenAI: tokens served from cache when the context is the prompt's start, by OpenAI's
  published rule (prompts of 1,024 tokens or more; the longest prefix computed before, in
  steps of 128 tokens from 1,024: ``openai_cached_tokens``);
- Anthropic: tokens served from cache when the context is sent as one system text block per
  line, with a cache breakpoint on the last line before the memories (in the older layout,
  the last line before its memories: the end of the summary), by Anthropic's published rule
  (a hit where the prompt up to a block boundary at most 20 blocks before a breakpoint equals
  a prefix an earlier request wrote at its breakpoint; at least 1,024 tokens, the minimum of
  Claude Sonnet 4.5 and Opus 4.1: ``anthropic_cached_tokens``).

Tokens are estimated as characters / 4 (rounded up), the rule of thumb both providers give for
English; only ratios between the two layouts are read from them.

Writes ``bench/results/prefix_cache.md`` and ``.png``.

    make bench-prefix-cache                       # 3 conversations, both modes
    python -m bench.prefix_cache --conversations 10
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from agent_memory.memories.models import MemoryView as CoreMemoryView
from agent_memory.memories.recall import render_context
from agent_memory.sessions.models import Message as CoreMessage
from kividb_memory import MemoryClient, RecallView, StoreClient
from local.bootstrap import start_redis_server
from local.launch import running_stack
from tools.progress import Progress
from tools.replay import agent_steps, load_locomo, locomo_sample_ids
from tools.scripted_model import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
API_KEY = "kvm_bench_prefix_0123456789abcdefghijklmn"
TARGET = 0.8
"""The issue's target: median prefix share over turns without a fold, in recall's order."""

CHARS_PER_TOKEN = 4
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
"""OpenAI, "Prompt caching": automatic for prompts of 1,024 tokens or more; a hit is the
longest prefix computed before, in increments of 128 tokens."""
ANTHROPIC_MIN_TOKENS = 1024
ANTHROPIC_LOOKBACK_BLOCKS = 20
"""Anthropic, "Prompt caching": a breakpoint (``cache_control``) writes the prompt up to it;
a later request reads the longest prefix ending at a block boundary at most 20 blocks before
one of its breakpoints that an earlier request wrote; 1,024 tokens at least (Claude Sonnet
4.5, Opus 4.1, Sonnet 4; more for some models)."""

SUMMARIZE_AFTER = 40
"""The store's ``summarize_after`` (the default): the older window's size."""
MEMORIES = "## Long-term memories about the user"
PROFILE = "## About the user"
SUMMARY = "## Summary of the earlier conversation"
MESSAGES = "## Recent messages"
OLD_ORDER = (PROFILE, SUMMARY, MEMORIES, MESSAGES)
PROFILE_FIELDS = [
    {"name": "name", "description": "What the user is called"},
    {"name": "city", "description": "Where the user lives"},
    {"name": "hobbies", "description": "The user's hobbies", "type": "list"},
]


# --- the measures (pure) -----------------------------------------------------------------------


def tokens(text: str) -> int:
    """Estimated tokens of ``text``: characters / ``CHARS_PER_TOKEN``, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``, in characters."""
    most = min(len(a), len(b))
    low, high = 0, most
    while low < high:  # a binary search over slices: C speed, not a character loop
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def prefix_share(previous: str, context: str) -> float:
    """The share of ``context``'s UTF-8 bytes that is a prefix of ``previous`` (0 to 1)."""
    if not context:
        return 1.0
    shared = context[: common_prefix(previous, context)]
    return len(shared.encode("utf-8")) / len(context.encode("utf-8"))


def older_layout(context: str) -> str:
    """``context`` in the order before recall's: its sections (each a heading, then its lines:
    no quoted text holds a line break, so ``\\n\\n`` only ever joins sections) in ``OLD_ORDER``
    after the header."""
    parts = context.split("\n\n")
    header, sections = parts[0], parts[1:]
    by_heading = {section.split("\n", 1)[0]: section for section in sections}
    if len(by_heading) != len(sections) or not set(by_heading) <= set(OLD_ORDER):
        raise ValueError(f"not a context of recall: {list(by_heading)}")
    return "\n\n".join([header, *[by_heading[h] for h in OLD_ORDER if h in by_heading]])


def openai_cached_tokens(previous: str, context: str) -> int:
    """Tokens of ``context`` (the prompt's start) OpenAI serves from cache after ``previous``:
    none under ``OPENAI_MIN_TOKENS`` shared, else the shared tokens down to a step of
    ``OPENAI_STEP_TOKENS`` above it."""
    shared = tokens(context[: common_prefix(previous, context)])
    if shared < OPENAI_MIN_TOKENS:
        return 0
    return (
        OPENAI_MIN_TOKENS + (shared - OPENAI_MIN_TOKENS) // OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS
    )


def blocks(context: str) -> tuple[list[str], int]:
    """``context`` as Anthropic text blocks, one a line (each with its line break, so the
    blocks join to the context), and the index of the block that carries the breakpoint: the
    last before the memories heading (the last block when there is none)."""
    lines = context.split("\n")
    parts = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    if MEMORIES in lines:
        at = lines.index(MEMORIES)
        return parts, max(at - 2, 0)  # the line before the blank line before the heading
    return parts, len(parts) - 1


def anthropic_cached_tokens(context: str, written: set[str]) -> int:
    """Tokens of ``context`` Anthropic serves from cache, given the prefixes earlier requests
    wrote (``written``, which this request's breakpoint prefix then joins): the longest prefix
    ending at a block boundary at most ``ANTHROPIC_LOOKBACK_BLOCKS`` blocks before the
    breakpoint (``blocks``) that was written, when it holds ``ANTHROPIC_MIN_TOKENS`` or more."""
    parts, breakpoint = blocks(context)
    ends = [0]
    for part in parts:
        ends.append(ends[-1] + len(part))
    served = 0
    for at in range(breakpoint, max(breakpoint - ANTHROPIC_LOOKBACK_BLOCKS, -1), -1):
        prefix = context[: ends[at + 1]]
        if prefix in written:
            served = tokens(prefix)
            break
    cached = context[: ends[breakpoint + 1]]
    if tokens(cached) >= ANTHROPIC_MIN_TOKENS:
        written.add(cached)
    return served if served >= ANTHROPIC_MIN_TOKENS else 0


# --- the replay --------------------------------------------------------------------------------


@dataclass
class Turn:
    """One recall after the first of its session, in both layouts."""

    conversation: str
    fold: bool
    shares: dict[str, float]
    prompt_tokens: dict[str, int]
    openai: dict[str, int]
    anthropic: dict[str, int]
    sections: dict[str, int]
    """Bytes of each section of the turn's context (by heading; ``header`` the lines before)."""


@dataclass
class Replayed:
    turns: list[Turn] = field(default_factory=list)
    recalls: int = 0
    sessions: int = 0
    seconds: float = 0.0


def _fold_between(before: RecallView, after: RecallView) -> bool:
    """Whether the session folded between two recalls (its summary changed)."""
    return before.summary != after.summary


def contexts(view: RecallView) -> dict[str, str]:
    """The context of ``view`` in each layout (``LAYOUTS``): recall's own; recall's order with
    the older window (the newest ``SUMMARIZE_AFTER`` messages, sliding); and the one before
    (7cd5664), the older order with the older window. Rendered again from ``view``'s parts by
    ``render_context``, which must give recall's context back (else the comparison would be
    of something else)."""
    profile = view.profile or {}
    # the client's views as the core's models, which render_context takes
    memories = [CoreMemoryView.model_validate(m.model_dump()) for m in view.memories]
    messages = [CoreMessage.model_validate(m.model_dump()) for m in view.messages]
    again = render_context(view.summary, memories, messages, view.messages_omitted, profile)
    if again != view.context:
        raise RuntimeError("render_context no longer renders recall's context from its parts")
    sliding = render_context(view.summary, memories, messages[-SUMMARIZE_AFTER:], 0, profile)
    return {"recall": view.context, "slide": sliding, "older": older_layout(sliding)}


def _wait_extracted(store: StoreClient, session_id: str, deadline_s: float = 120) -> None:
    store.extract(session_id)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        extraction = store.get_session(session_id, recent=1).extraction
        if extraction.unread == 0 and extraction.status != "running":
            return
        time.sleep(0.1)
    raise RuntimeError(f"the extraction of {session_id} did not finish in {deadline_s:.0f} s")


def replay(
    client: MemoryClient, store_name: str, sample_ids: Sequence[str], *, one_session: bool = False
) -> Replayed:
    """Replay the conversations ``sample_ids`` into ``store_name`` and measure every turn:
    each LoCoMo session a session of its own, or with ``one_session`` each conversation one
    session (an assistant that keeps one thread per user), extracted after each LoCoMo
    session either way."""
    data = json.loads(DATA.read_text())
    store = client.store("local", store_name)
    done = Replayed()
    started = time.perf_counter()
    progress = Progress(f"prefix-cache {store_name}")
    for sample_id in sample_ids:
        conversation = load_locomo(data, sample_id)
        with progress.stage(sample_id, conversation.message_count, "message") as stage:
            previous: RecallView | None = None
            written: dict[str, set[str]] = {key: set() for key in LAYOUTS}
            for session in conversation.sessions:
                session_id = sample_id if one_session else f"{sample_id}-{session.session_id}"
                if not one_session:
                    previous, written = None, {key: set() for key in LAYOUTS}
                for step in agent_steps(session):
                    if step.query is not None:
                        view = store.recall(session_id, step.query, conversation.actor_id)
                        done.recalls += 1
                        turn = _turn(sample_id, previous, view, written)
                        if turn is not None:
                            done.turns.append(turn)
                        previous = view
                    events = [m.event() for m in step.messages]
                    store.add_events(session_id, events, actor_id=conversation.actor_id)
                    stage.advance(len(step.messages))
                _wait_extracted(store, session_id)
                done.sessions += 1
    done.seconds = time.perf_counter() - started
    return done


def _turn(
    sample_id: str, previous: RecallView | None, view: RecallView, written: dict[str, set[str]]
) -> Turn | None:
    """The measures of ``view`` after ``previous`` (None for a session's first recall, which
    only writes its prefix to Anthropic's cache, ``written``, by layout)."""
    now = contexts(view)
    anthropic = {k: anthropic_cached_tokens(context, written[k]) for k, context in now.items()}
    if previous is None:
        return None
    before = contexts(previous)
    return Turn(
        conversation=sample_id,
        fold=_fold_between(previous, view),
        shares={k: prefix_share(before[k], now[k]) for k in now},
        prompt_tokens={k: tokens(now[k]) for k in now},
        openai={k: openai_cached_tokens(before[k], now[k]) for k in now},
        anthropic=anthropic,
        sections=section_bytes(view.context),
    )


def section_bytes(context: str) -> dict[str, int]:
    """UTF-8 bytes of each part of ``context``: ``header``, then each section by heading."""
    parts = context.split("\n\n")
    sizes = {"header": len(parts[0].encode("utf-8"))}
    for section in parts[1:]:
        sizes[section.split("\n", 1)[0]] = len(section.encode("utf-8"))
    return sizes


# --- the report --------------------------------------------------------------------------------

LAYOUTS = {
    "recall": "recall: its order and window",
    "slide": "recall's order, the older sliding window",
    "older": "before (7cd5664): the older order and window",
}
MODES = {
    "thread": "each conversation one session (a thread per user, folded as it grows)",
    "daily": "each LoCoMo session a session of its own (a thread per day, 22 messages median)",
}


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _p10(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10)[0] if len(values) >= 2 else float("nan")


def _table(done: Replayed) -> list[str]:
    calm = [t for t in done.turns if not t.fold]
    folds = [t for t in done.turns if t.fold]
    lines = [
        "| layout | median prefix share, turns without a fold | p10 | median, turns with "
        "a fold | OpenAI cached / prompt tokens | Anthropic cached / prompt tokens |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in LAYOUTS.items():
        prompt = sum(t.prompt_tokens[key] for t in done.turns)
        openai = sum(t.openai[key] for t in done.turns)
        anthropic = sum(t.anthropic[key] for t in done.turns)
        calm_shares = [t.shares[key] for t in calm]
        fold_shares = [t.shares[key] for t in folds]
        lines.append(
            f"| {label} | {_median(calm_shares):.3f} | {_p10(calm_shares):.3f} | "
            f"{f'{_median(fold_shares):.3f}' if fold_shares else 'no fold'} | "
            f"{openai:,} / {prompt:,} ({openai / max(prompt, 1):.1%}) | "
            f"{anthropic:,} / {prompt:,} ({anthropic / max(prompt, 1):.1%}) |"
        )
    return lines


def _served(done: Replayed, key: str, provider: str) -> int:
    return sum(getattr(t, provider)[key] for t in done.turns)


def report(runs: dict[str, Replayed], sample_ids: Sequence[str], seconds: float) -> str:
    """The results as Markdown: for each replay mode, prefix shares and cached tokens by
    layout; the ratios; the target's verdict (the ``thread`` mode)."""
    lines = [
        "# A recall a prompt cache can reuse",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, `make bench-prefix-cache` "
        f"(`python -m bench.prefix_cache --conversations {len(sample_ids)}`, "
        f"bench/prefix_cache.py), {seconds:.0f} s. LoCoMo {', '.join(sample_ids)} replayed "
        "turn by turn through the local stack (2 workers) with the scripted model: recall "
        "with each user message, then the message and its replies; each LoCoMo session "
        "extracted after it ends.",
        "",
        "Prefix share: the bytes of a turn's context that are a prefix of the previous "
        "turn's (same session), over its bytes; a fold (the summary changed) starts a new "
        "prefix. Tokens: characters / 4. OpenAI: the context as the prompt's start, served "
        "from 1,024 tokens in steps of 128. Anthropic: one system block a line, the "
        "breakpoint on the last line before the memories, a 20-block lookback, 1,024 tokens "
        "at least. The layouts are the same recall rendered three ways (`render_context`).",
        "",
    ]
    for mode, done in runs.items():
        calm = [t for t in done.turns if not t.fold]
        lines += [
            f"## {MODES[mode]}",
            "",
            f"{done.sessions} sessions, {done.recalls} recalls, {len(done.turns)} turns after "
            f"a session's first, {len(done.turns) - len(calm)} of them with a fold.",
            "",
            *_table(done),
            "",
            "Median bytes of a turn's context by part (turns without a fold; 0 when absent): "
            + ", ".join(
                f"{name.removeprefix('## ')} "
                f"{_median([t.sections.get(name, 0) for t in calm]):,.0f}"
                for name in ("header", PROFILE, SUMMARY, MESSAGES, MEMORIES)
            )
            + ".",
            "",
            "Cached tokens, recall to before: OpenAI "
            f"{_ratio(_served(done, 'recall', 'openai'), _served(done, 'older', 'openai'))}, "
            "Anthropic "
            f"{_ratio(_served(done, 'recall', 'anthropic'), _served(done, 'older', 'anthropic'))}"
            "; by conversation, median prefix share without a fold (recall / before): "
            + "; ".join(
                f"{sample_id} {_median([t.shares['recall'] for t in mine]):.3f} / "
                f"{_median([t.shares['older'] for t in mine]):.3f}"
                for sample_id in sample_ids
                if (mine := [t for t in calm if t.conversation == sample_id])
            )
            + ".",
            "",
        ]
    median = _median([t.shares["recall"] for t in runs["thread"].turns if not t.fold])
    lines.append(
        f"Target (a thread per user): median prefix share >= {TARGET} on turns without a "
        f"fold: {median:.3f}, {'met' if median >= TARGET else 'NOT met'}."
    )
    return "\n".join(lines) + "\n"


def _ratio(new: int, old: int) -> str:
    return f"{new / old:.2f}x" if old else ("none before" if new else "none either way")


def plot(runs: dict[str, Replayed], path: Path) -> None:
    """For each replay mode: per-turn prefix share, sorted, of each layout (turns without a
    fold), and the share of prompt tokens each provider serves from cache."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(runs), 2, figsize=(12, 4 * len(runs)), squeeze=False)
    for (mode, done), (left, right) in zip(runs.items(), axes, strict=True):
        calm = [t for t in done.turns if not t.fold]
        for key, label in LAYOUTS.items():
            shares = sorted(t.shares[key] for t in calm)
            places = [n / max(len(shares) - 1, 1) for n in range(len(shares))]
            left.plot(places, shares, label=label)
        left.axhline(TARGET, color="grey", linestyle=":", label=f"target median {TARGET}")
        left.set_title(MODES[mode].split(" (")[0], fontsize=10)
        left.set_xlabel("turns without a fold (sorted)")
        left.set_ylabel("prefix share of the context's bytes")
        left.legend(fontsize=8)
        width = 0.25
        for n, (key, label) in enumerate(LAYOUTS.items()):
            prompt = max(sum(t.prompt_tokens[key] for t in done.turns), 1)
            served = [
                _served(done, key, "openai") / prompt,
                _served(done, key, "anthropic") / prompt,
            ]
            right.bar([(n - 1) * width, 1 + (n - 1) * width], served, width, label=label)
        right.set_xticks([0, 1], ["OpenAI", "Anthropic"])
        right.set_ylabel("prompt tokens served from cache")
        right.set_ylim(0, 1)
        right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    """Replay ``--conversations`` LoCoMo conversations in both modes (``MODES``); write
    ``prefix_cache.md`` and ``.png`` to ``--out``; exit 0 when the target is met, 1 when
    not."""
    parser = argparse.ArgumentParser(prog="python -m bench.prefix_cache")
    parser.add_argument("--conversations", type=int, default=3, help="LoCoMo conversations (1-10)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-plot", action="store_true", help="write prefix_cache.md only")
    args = parser.parse_args(argv)
    sample_ids = locomo_sample_ids(json.loads(DATA.read_text()))[: args.conversations]
    started = time.perf_counter()
    runs: dict[str, Replayed] = {}
    with TemporaryDirectory() as folder:
        database = start_redis_server(Path(folder), persist=False)
        model = ScriptedServer()
        model.start()
        env = {
            "REDIS_URL": database.url,
            "KIVIDB_API_KEY": API_KEY,
            "KIVIDB_LOCAL_DIR": str(Path(folder) / "local"),
            "KIVIDB_WORKERS": "2",
            "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",  # the scripted model is on loopback
        }
        try:
            with (
                running_stack(env, log=Path(folder) / "stack.log") as (url, _),
                MemoryClient(url, API_KEY, timeout=60.0) as client,
            ):
                for mode in MODES:
                    client.put_store(
                        "local",
                        mode,
                        llm_provider="custom",
                        llm_model="scripted",
                        llm_base_url=model.url,
                        embed_provider="custom",
                        embed_model="scripted",
                        embed_base_url=model.url,
                        dimensions=384,
                        summarize_after=SUMMARIZE_AFTER,
                        profile_fields=PROFILE_FIELDS,
                        # no run may merge memories mid-replay: each turn's context is measured
                        consolidate_after_memories=0,
                    )
                    runs[mode] = replay(client, mode, sample_ids, one_session=mode == "thread")
        finally:
            model.shutdown()
            model.server_close()
            database.stop()
    text = report(runs, sample_ids, time.perf_counter() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prefix_cache.md").write_text(text, encoding="utf-8")
    if not args.no_plot:
        plot(runs, args.out / "prefix_cache.png")
    print(text)
    calm = [t.shares["recall"] for t in runs["thread"].turns if not t.fold]
    return 0 if calm and _median(calm) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
