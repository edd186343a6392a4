"""Retrieval quality on LoCoMo through the local stack: hit@k and evidence coverage@k.

For each conversation of ``../shared/data/locomo/locomo10.json`` (Maharana et al., ACL 2024; CC
BY-NC 4.0, test data only) the benchmark makes one store whose memories are that conversation's
``observation`` facts, one actor per conversation; the benchmark keeps the turns each memory
cites by its id (the memories carry no metadata: topics and metadata values count in keyword
search, and the "Fields" section measures that apart). The store embeds through its ``custom``
provider, pointed at a local OpenAI-shaped server (``bench.embedding_server``,
``all-MiniLM-L6-v2``, 384 dimensions) that the benchmark starts, as it starts the local stack
(``python -m local``, its own ``redis-server`` child, ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1`` so
the store may use ``http://127.0.0.1``). Every memory is added with ``POST .../memories`` and
every question of categories 1 to 4 is searched with ``POST .../memories/search`` (``limit`` 20)
in the modes semantic, keyword and hybrid.

Metrics, for k = 1, 5, 10, 20, averaged over the questions:
- hit@k: 1 when one of the top k memories cites an evidence turn of the question;
- evidence coverage@k: the fraction of the question's evidence turns cited by the top k.

Evidence strings are split on ``[;\\s]+`` and only ids of turns of the conversation are kept;
questions left with no evidence are skipped (counted). Observation ids are split on
``[,;\\s]+`` (a few are comma-separated lists) and validated the same way.

A baseline row, "blend 0.7/0.3", is computed here from the semantic and keyword result lists:
``0.7 * cosine + 0.3 * BM25 / max BM25 of the list`` (0 for a list a memory is missing from).
The fusion check (``--no-fusion-check`` skips it) also asks for each mode's
``CANDIDATES * limit`` candidates, applies the store's ``fuse`` to them in-process (it must give
the hybrid answers: a consistency check) and a few other fusion rules, and reports their hit@10
on the first and second half of the conversations. It also reports an oracle, not a rule: the
hit@10 when the store's ``fuse`` weight is chosen afterwards, per question, as the best of 0,
0.1, ..., 1 (the ceiling of any weight setting, even one that adapts to the query).

Keyword search (and the keyword half of hybrid) is the store's own: BM25 over light-stemmed
tokens, the query's English stop words dropped (``agent_memory.search.tokenizer``).

Writes ``bench/results/retrieval.md`` and ``retrieval.png``.

    python -m bench.retrieval                      # all 10 conversations
    python -m bench.retrieval --conversations 2    # the first 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import cast

import httpx

from agent_memory.memories.ranking import CANDIDATES
from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.when import TimeWindow, time_window
from bench.rerank_server import RerankServer
from bench.retrieval_fields import FieldIndexes, rows as field_rows, section as fields_section
from bench.retrieval_scores import Result, Scored, Words, dump, section as scores_section
from bench.retrieval_signals import (
    ENTITY_ROW,
    ENTITY_WEIGHTS,
    TIME_ROW,
    TIME_WEIGHTS,
    EntityIndex,
    boosted,
    entity_boosted,
    entity_section,
    section as time_section,
    session_dates,
)
from kividb_memory import MemoryClient, MemoryView, StoreClient
from kividb_memory.models import SearchMode
from local.bootstrap import free_port
from local.launch import running_stack, stop
from tools.progress import Progress, Stage

ROOT = Path(__file__).resolve().parent.parent

DATA = (ROOT / "../shared/data/locomo/locomo10.json").resolve()
RESULTS = ROOT / "bench" / "results"
API_KEY = "kvm_bench_retrieval_0123456789abcdefghijkl"
MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MODES = ("semantic", "keyword", "hybrid")
RERANKED = "hybrid + rerank (word-overlap stand-in)"
"""The row of hybrid searches whose best ``rerank_candidates`` a loopback reranker with a fixed
delay orders (``bench.rerank_server``): its latency is the stage's; its hit@10 is word
overlap's, not a cross-encoder's."""
BLEND = "blend 0.7/0.3"
KS = (1, 5, 10, 20)
LIMIT = 20
TARGET = 0.77
RERANK_DELAY_MS = 100.0
"""The loopback reranker's delay per call: a hosted cross-encoder's time for 50 short texts."""
RERANK_CANDIDATES = 50
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE_SPLIT = re.compile(r"[;\s]+")
_OBSERVATION_SPLIT = re.compile(r"[,;\s]+")
_SESSION = re.compile(r"^session_\d+$")


# --- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    facts: list[tuple[str, list[str]]]
    questions: list[Question]
    skipped: dict[int, int] = field(default_factory=dict)
    """Questions of each category skipped for having no valid evidence turn."""
    dates: list[datetime | None] = field(default_factory=list)
    """Each fact's session date (its memory's ``occurred_at``), in ``facts`` order."""
    reference: datetime | None = None
    """The last session's date: when the questions are asked."""
    speakers: list[str] = field(default_factory=list)
    """Whose observation each fact is, in ``facts`` order (``bench.retrieval_fields``)."""


def load_conversations(path: Path) -> list[Conversation]:
    """The LoCoMo samples as facts (text, cited turn ids) and the category 1-4 questions."""
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        turns = {
            turn["dia_id"]
            for key, session in sample["conversation"].items()
            if _SESSION.match(key)
            for turn in session
        }
        facts = []
        dates = session_dates(sample["conversation"])
        when: list[datetime | None] = []
        speakers: list[str] = []
        for key, per_speaker in sample["observation"].items():
            number = re.match(r"^session_(\d+)_observation$", key)
            for speaker, speaker_facts in per_speaker.items():
                for text, cited in speaker_facts:
                    raw = cited if isinstance(cited, list) else [cited]
                    ids = _valid(raw, _OBSERVATION_SPLIT, turns)
                    facts.append((text, ids))
                    when.append(dates.get(int(number[1])) if number else None)
                    speakers.append(speaker)
        conversation = Conversation(
            sample["sample_id"],
            facts,
            [],
            dates=when,
            reference=max(dates.values(), default=None),
            speakers=speakers,
        )
        for qa in sample["qa"]:
            category = qa["category"]
            if category not in CATEGORIES:
                continue
            evidence = frozenset(_valid(qa["evidence"], _EVIDENCE_SPLIT, turns))
            if not evidence:
                conversation.skipped[category] = conversation.skipped.get(category, 0) + 1
                continue
            conversation.questions.append(Question(qa["question"], category, evidence))
        conversations.append(conversation)
    return conversations


def _valid(raw: Sequence[str], splitter: re.Pattern[str], turns: set[str]) -> list[str]:
    ids: list[str] = []
    for item in raw:
        for part in splitter.split(item):
            if part in turns and part not in ids:
                ids.append(part)
    return ids


# --- metrics ---------------------------------------------------------------------------------


def hit_at(cited: Sequence[frozenset[str]], evidence: frozenset[str], k: int) -> float:
    """1.0 when one of the first ``k`` results cites an evidence turn, else 0.0."""
    return 1.0 if any(c & evidence for c in cited[:k]) else 0.0


def coverage_at(cited: Sequence[frozenset[str]], evidence: frozenset[str], k: int) -> float:
    """The fraction of ``evidence`` cited by the first ``k`` results."""
    found: set[str] = set()
    for c in cited[:k]:
        found |= c
    return len(found & evidence) / len(evidence)


def blend(
    semantic: Sequence[Hit], keyword: Sequence[Hit], limit: int, weight: float = 0.7
) -> list[Hit]:
    """The plain baseline: ``weight * cosine + (1 - weight) * BM25 / max BM25`` over the two
    lists; a memory missing from a list scores 0 there."""
    top = max((h.score for h in keyword), default=0.0) or 1.0
    scores: dict[str, float] = {}
    for h in semantic:
        scores[h.memory_id] = weight * h.score
    for h in keyword:
        scores[h.memory_id] = scores.get(h.memory_id, 0.0) + (1.0 - weight) * h.score / top
    return _ranked(scores, limit)


def rrf(
    semantic: Sequence[Hit], keyword: Sequence[Hit], limit: int, k: int = 60, weight: float = 0.5
) -> list[Hit]:
    """Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009), ``k`` = 60 there;
    ``weight`` is the semantic share (0.5: the paper's unweighted sum, up to a factor)."""
    scores: dict[str, float] = {}
    for share, hits in ((weight, semantic), (1.0 - weight, keyword)):
        for rank, h in enumerate(hits, start=1):
            scores[h.memory_id] = scores.get(h.memory_id, 0.0) + 2 * share / (k + rank)
    return _ranked(scores, limit)


def minmax(
    semantic: Sequence[Hit], keyword: Sequence[Hit], limit: int, weight: float = 0.6
) -> list[Hit]:
    """Min-max normalisation of each list, then a weighted sum (missing: 0)."""
    scores: dict[str, float] = {}
    for share, hits in ((weight, semantic), (1.0 - weight, keyword)):
        if not hits:
            continue
        low = min(h.score for h in hits)
        spread = (max(h.score for h in hits) - low) or 1.0
        for h in hits:
            normal = (h.score - low) / spread
            scores[h.memory_id] = scores.get(h.memory_id, 0.0) + share * normal
    return _ranked(scores, limit)


def _ranked(scores: dict[str, float], limit: int) -> list[Hit]:
    ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [Hit(memory_id, score) for memory_id, score in ordered]


Fusion = Callable[[Sequence[Hit], Sequence[Hit], int], list[Hit]]
OWN = "the store's fuse (hybrid)"
ORACLE_WEIGHTS = tuple(i / 10 for i in range(11))
"""The semantic weights the oracle picks from, per question."""
_ORACLE = "oracle weight {}"
FUSIONS: dict[str, Fusion] = {
    OWN: fuse,
    "the store's fuse, weight 0.5": lambda s, k, n: fuse(s, k, n, 0.5),
    "the store's fuse, weight 0.7": lambda s, k, n: fuse(s, k, n, 0.7),
    "the store's fuse, 1 x limit candidates": lambda s, k, n: fuse(s[:n], k[:n], n),
    "the store's fuse, 2 x limit candidates": lambda s, k, n: fuse(s[: 2 * n], k[: 2 * n], n),
    "min-max, weight 0.6": minmax,
    "RRF, k = 60": rrf,
    "RRF, k = 10, weight 0.6": lambda s, k, n: rrf(s, k, n, 10, 0.6),
    "0.7 cosine + 0.3 max-normalised BM25": blend,
}


# --- running through the stack ---------------------------------------------------------------


@dataclass
class Outcome:
    """One question's ranked citations per row (mode, baseline or fusion rule)."""

    sample_id: str
    question: Question
    cited: dict[str, list[frozenset[str]]]
    window: TimeWindow | None = None
    """The question's time window (``agent_memory.search.when``), if it names a time."""


@dataclass
class Timing:
    add_ms: list[float] = field(default_factory=list)
    search_ms: dict[str, list[float]] = field(default_factory=dict)
    reranked: int = 0
    """Searches of the ``RERANKED`` row that the reranker did order (``"reranked": true``)."""
    rerank_delay_ms: float = 0.0
    add_seconds: float = 0.0
    search_seconds: float = 0.0
    duplicates: int = 0
    fuse_agrees: int = 0
    """Questions whose hybrid answer lists the same memories as ``fuse`` applied here."""


def _wait(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                # The caller stops the process (SIGTERM, so the stack stops its redis-server).
                text = log.read_text(errors="replace")[-4000:]
                raise RuntimeError(f"{process.args!r} did not start:\n{text}") from None
            time.sleep(0.2)


@contextmanager
def services(folder: Path) -> Iterator[tuple[str, str]]:
    """The embedding server and the local stack, as subprocesses; yields (API URL, the
    embedding server's base URL). Their logs go to ``folder``."""
    embed_port = free_port()
    embed_log = folder / "embedding_server.log"
    stack_log = folder / "stack.log"
    with embed_log.open("wb") as out:
        embedder = subprocess.Popen(
            [sys.executable, "-m", "bench.embedding_server", "--port", str(embed_port)],
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        embed_url = f"http://127.0.0.1:{embed_port}/v1"
        _wait(embed_url + "/models", embedder, embed_log, 180)
        env: dict[str, str | None] = {
            "REDIS_URL": None,  # the stack starts its own redis-server
            "KIVIDB_LOCAL_DIR": str(folder / "local"),
            "KIVIDB_API_KEY": API_KEY,
            "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
            "KIVIDB_WORKERS": "2",
        }
        with running_stack(env, log=stack_log) as (api_url, _):
            yield api_url, embed_url
    finally:
        stop(embedder)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def _hits(memories: list[MemoryView]) -> list[Hit]:
    return [Hit(m.id, float(m.score or 0.0)) for m in memories]


def _scored(
    sample_id: str,
    own: bool,
    mode: str,
    question: Question,
    words: Words,
    memories: list[MemoryView],
    cites: Mapping[str, frozenset[str]],
) -> Scored:
    """A ``Scored`` row of one search's results (``bench.retrieval_scores``)."""
    results = tuple(
        Result(
            m.similarity,
            words.coverage(question.text, m.text),
            float(m.score or 0.0),
            bool(question.evidence & cites.get(m.id, frozenset())),
        )
        for m in memories
    )
    return Scored(sample_id, own, mode, results)


def _wide_rows(
    lists: dict[str, list[Hit]],
    occurred: dict[str, int | None],
    texts: dict[str, str],
    known: EntityIndex,
    window: TimeWindow | None,
    query: str,
) -> dict[str, list[Hit]]:
    """The rows computed here from the wide semantic and keyword lists: the fusion rules, the
    oracle's weights, the time boosts and the entity experiment."""
    wide = (lists["semantic wide"], lists["keyword wide"])
    rows = {name: rule(*wide, LIMIT) for name, rule in FUSIONS.items()}
    for weight in ORACLE_WEIGHTS:
        rows[_ORACLE.format(weight)] = fuse(*wide, LIMIT, weight)
    for weight in TIME_WEIGHTS:
        rows[TIME_ROW.format(weight)] = boosted(*wide, occurred, window, weight, LIMIT)
    pool = boosted(*wide, occurred, window, 2.0, 2 * CANDIDATES * LIMIT)
    for weight in ENTITY_WEIGHTS:
        rows[ENTITY_ROW.format(weight)] = entity_boosted(pool, texts, known, query, weight, LIMIT)
    return rows


def _reranked(
    memory: MemoryClient,
    store: StoreClient,
    name: str,
    actor: str,
    conversation: Conversation,
    outcomes: list[Outcome],
    rerank_url: str,
    timing: Timing,
    bar: Stage,
    cites: Mapping[str, frozenset[str]],
) -> None:
    """Give the store the loopback reranker and ask each question once more, hybrid, reranked:
    the ``RERANKED`` row of ``outcomes`` (in ``conversation.questions`` order) and its time."""
    memory.put_store(
        "local",
        name,
        rerank_provider="custom",
        rerank_model="word-overlap",
        rerank_base_url=rerank_url,
        rerank_candidates=RERANK_CANDIDATES,
    )
    for question, outcome in zip(conversation.questions, outcomes, strict=True):
        began = time.perf_counter()
        found = store.search(
            question.text,
            mode="hybrid",
            actor_id=actor,
            limit=LIMIT,
            min_score=0,
            reference_time=conversation.reference,
        )
        timing.search_ms.setdefault(RERANKED, []).append((time.perf_counter() - began) * 1000)
        timing.reranked += bool(found.reranked)
        outcome.cited[RERANKED] = [cites.get(m.id, frozenset()) for m in found.memories]
        bar.advance()


def run_conversation(
    memory: MemoryClient,
    embed_url: str,
    conversation: Conversation,
    foreign: Sequence[Question],
    fusion_check: bool,
    timing: Timing,
    bar: Stage,
    rerank_url: str | None = None,
) -> tuple[list[Outcome], list[Scored]]:
    """Add the conversation's facts to a new store, then search it with its own questions
    (every mode, and the fusion check's wide lists) and with ``foreign`` (every mode), each
    with ``min_score`` 0 (every result of the top ``LIMIT``); the store is deleted after."""
    name = f"locomo-{conversation.sample_id}"
    actor = conversation.sample_id
    settings = {
        "embed_provider": "custom",
        "embed_model": MODEL,
        "embed_base_url": embed_url,
        "dimensions": DIMENSIONS,
        "dedupe_threshold": 1.0,
        "redact_pii": False,
    }
    memory.put_store("local", name, **settings)
    store = memory.store("local", name)
    start = time.perf_counter()
    kept_ids: list[str] = []
    all_cites: dict[str, frozenset[str]] = {}
    all_occurred: dict[str, int | None] = {}
    for (text, ids), said_on in zip(conversation.facts, conversation.dates, strict=True):
        began = time.perf_counter()
        kept = store.add_memory(text, actor_id=actor, occurred_at=said_on)
        timing.add_ms.append((time.perf_counter() - began) * 1000)
        timing.duplicates += bool(kept.duplicate)
        kept_ids.append(kept.id)
        all_cites[kept.id] = frozenset(ids)
        all_occurred[kept.id] = _ms(kept.occurred_at)
        bar.advance()
    timing.add_seconds += time.perf_counter() - start
    field_indexes = None
    if fusion_check:
        texts_kept = [text for text, _ in conversation.facts]
        turns_cited = [ids for _, ids in conversation.facts]
        field_indexes = FieldIndexes(kept_ids, texts_kept, conversation.speakers, turns_cited)

    wide = CANDIDATES * LIMIT
    start = time.perf_counter()
    words = Words([text for text, _ in conversation.facts])
    known = EntityIndex([text for text, _ in conversation.facts])
    outcomes = []
    scored: list[Scored] = []
    for question in conversation.questions:
        lists: dict[str, list[Hit]] = {}
        occurred: dict[str, int | None] = {}
        texts: dict[str, str] = {}
        window = time_window(question.text, conversation.reference or datetime.now(UTC))
        requests = [(mode, LIMIT) for mode in MODES]
        if fusion_check:
            requests += [("semantic", wide), ("keyword", wide)]
        for mode, limit in requests:
            began = time.perf_counter()
            kind = cast(SearchMode, mode)
            # The wide lists leave time out: the rows computed here add it themselves.
            found = store.search(
                question.text,
                mode=kind,
                actor_id=actor,
                limit=limit,
                min_score=0,
                reference_time=conversation.reference,
                time_ranking=limit == LIMIT,
            )
            if limit == LIMIT:
                timing.search_ms.setdefault(mode, []).append((time.perf_counter() - began) * 1000)
                scored.append(
                    _scored(
                        conversation.sample_id,
                        True,
                        mode,
                        question,
                        words,
                        found.memories,
                        all_cites,
                    )
                )
            hits = _hits(found.memories)
            lists[mode if limit == LIMIT else f"{mode} wide"] = hits
            occurred.update({m.id: _ms(m.occurred_at) for m in found.memories})
            texts.update({m.id: m.text for m in found.memories})
            bar.advance()
        rows = {mode: lists[mode] for mode in MODES}
        rows[BLEND] = blend(lists["semantic"], lists["keyword"], LIMIT)
        if fusion_check:
            rows |= _wide_rows(lists, occurred, texts, known, window, question.text)
        if field_indexes is not None:
            rows |= field_rows(
                field_indexes.lists(question.text, wide),
                lists["semantic wide"],
                lambda s, k: boosted(s, k, all_occurred, window, 2.0, LIMIT),  # noqa: B023
                LIMIT,
            )
            same = [h.memory_id for h in rows[OWN]] == [h.memory_id for h in lists["hybrid"]]
            timing.fuse_agrees += same and window is None  # a time named reorders the API's
        outcomes.append(
            Outcome(
                conversation.sample_id,
                question,
                {name: [all_cites[h.memory_id] for h in hits] for name, hits in rows.items()},
                window,
            )
        )
    for question in foreign:
        for mode in MODES:
            kind = cast(SearchMode, mode)
            found = store.search(question.text, mode=kind, actor_id=actor, limit=LIMIT, min_score=0)
            scored.append(
                _scored(
                    conversation.sample_id, False, mode, question, words, found.memories, all_cites
                )
            )
            bar.advance()
    # Last: from here on the store has a reranker, which would order every search above.
    if rerank_url is not None:
        _reranked(
            memory, store, name, actor, conversation, outcomes, rerank_url, timing, bar, all_cites
        )
    timing.search_seconds += time.perf_counter() - start
    memory.delete_store("local", name)
    return outcomes, scored


# --- report ----------------------------------------------------------------------------------


def mean_metric(
    outcomes: Sequence[Outcome],
    row: str,
    k: int,
    metric: Callable[[Sequence[frozenset[str]], frozenset[str], int], float],
) -> float:
    if not outcomes:
        return float("nan")
    return statistics.fmean(metric(o.cited[row], o.question.evidence, k) for o in outcomes)


def _percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, int(-(-pct * len(ordered) // 100)))
    return ordered[rank - 1]


def write_report(
    conversations: Sequence[Conversation],
    outcomes: Sequence[Outcome],
    timing: Timing,
    elapsed: float,
    command: str,
    fusion_check: bool,
    load: float,
    commit: str = "unknown",
    scored: Sequence[Scored] = (),
) -> str:
    rows = [*MODES, BLEND, *([RERANKED] if outcomes and RERANKED in outcomes[0].cited else [])]
    hybrid10 = mean_metric(outcomes, "hybrid", 10, hit_at)
    single10 = {m: mean_metric(outcomes, m, 10, hit_at) for m in ("semantic", "keyword")}
    union10 = statistics.fmean(
        hit_at([*o.cited["semantic"][:10], *o.cited["keyword"][:10]], o.question.evidence, 20)
        for o in outcomes
    )
    passed = hybrid10 >= TARGET
    beats = all(hybrid10 > v for v in single10.values())
    ids = [c.sample_id for c in conversations]
    lines = [
        "# Retrieval quality on LoCoMo",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC through the local stack (HTTP, "
        f"authorizer, handlers, redis-server), {len(conversations)} conversation(s) "
        f"({', '.join(ids)}): one store and one actor per conversation, its `observation` facts "
        f"as memories ({sum(len(c.facts) for c in conversations)} in all, without metadata; the "
        f"benchmark keeps the turns each cites by its id), embedded by the store's `custom` "
        f"provider with "
        f"`{MODEL}` ({DIMENSIONS} dimensions, served locally by `bench/embedding_server.py`). "
        f"Queries: the questions of categories 1-4, `POST .../memories/search` with "
        f"`limit` {LIMIT}. hit@k: a top-k memory cites an evidence turn; coverage@k: the "
        f"fraction of the question's evidence turns the top-k memories cite, averaged.",
        "",
        "| mode | "
        + " | ".join(f"hit@{k}" for k in KS)
        + " | "
        + " | ".join(f"coverage@{k}" for k in KS)
        + " |",
        "|---|" + "---|" * (2 * len(KS)),
    ]
    for row in rows:
        hits = [f"{mean_metric(outcomes, row, k, hit_at):.3f}" for k in KS]
        covs = [f"{mean_metric(outcomes, row, k, coverage_at):.3f}" for k in KS]
        name = f"{row} (baseline)" if row == BLEND else row
        lines.append(f"| {name} | " + " | ".join(hits) + " | " + " | ".join(covs) + " |")
    lines += [
        "",
        f"**Target: hybrid hit@10 >= {TARGET:.2f}: {'PASS' if passed else 'FAIL'}** "
        f"(hybrid {hybrid10:.3f}; semantic {single10['semantic']:.3f}, keyword "
        f"{single10['keyword']:.3f}: hybrid {'beats' if beats else 'does not beat'} both "
        "single modes).",
        "",
        f"Ceiling for fusions that pick from the two top 10s: {union10:.3f} of the questions have "
        "an evidence turn cited in the union of the semantic top 10 and the keyword top 10; "
        "beyond that, a hit needs a memory that both modes rank below 10th.",
        "",
        f"Baseline `{BLEND}`: `0.7 * cosine + 0.3 * BM25 / max BM25`, computed here from the "
        "semantic and keyword result lists (0 for a list a memory is missing from). Hybrid is "
        f"the store's `fuse` over {CANDIDATES} x limit candidates of each mode.",
        "",
        "## Questions and hit@10 per category",
        "",
        "| category | questions | skipped (no valid evidence) | "
        + " | ".join(f"{r} hit@10" for r in rows)
        + " |",
        "|---|---|---|" + "---|" * len(rows),
    ]
    for category, name in CATEGORIES.items():
        chosen = [o for o in outcomes if o.question.category == category]
        skipped = sum(c.skipped.get(category, 0) for c in conversations)
        values = [f"{mean_metric(chosen, r, 10, hit_at):.3f}" for r in rows]
        lines.append(
            f"| {category} {name} | {len(chosen)} | {skipped} | " + " | ".join(values) + " |"
        )
    total_skipped = sum(sum(c.skipped.values()) for c in conversations)
    lines += [
        f"| all | {len(outcomes)} | {total_skipped} | "
        + " | ".join(f"{mean_metric(outcomes, r, 10, hit_at):.3f}" for r in rows)
        + " |",
        "",
        "Evidence strings are split on `[;\\s]+` and only ids of turns of the conversation are "
        "kept; a question left with none is skipped.",
    ]
    if fusion_check and len(conversations) >= 2:
        lines += _fusion_section(conversations, outcomes, timing.fuse_agrees)
        half = len(conversations) // 2
        first = {c.sample_id for c in conversations[:half]}
        lines += time_section(outcomes, first, hit_at, OWN)[0]
        lines += entity_section(outcomes, first, hit_at, TIME_ROW.format(2.0))
        lines += fields_section(outcomes, first, hit_at)
    if scored and len(conversations) >= 2:
        half = len(conversations) // 2
        lines += scores_section(
            scored,
            {c.sample_id for c in conversations[:half]},
            ", ".join(c.sample_id for c in conversations[:half]),
            ", ".join(c.sample_id for c in conversations[half:]),
        )
    add = timing.add_ms
    lines += [
        "",
        "## Run",
        "",
        f"- command: `{command}`, code at commit {commit}",
        f"- run time: {elapsed:.0f} s in all (model load, stack start, adds, searches, report)",
        f"- adding {len(add)} memories (one request each, embedding included): "
        f"{timing.add_seconds:.1f} s, p50 {statistics.median(add):.1f} ms, "
        f"p99 {_percentile(add, 99):.1f} ms; duplicates reported by the API: "
        f"{timing.duplicates}",
    ]
    searches = sum(len(v) for v in timing.search_ms.values())
    lines.append(
        f"- searching: {timing.search_seconds:.1f} s for all search requests (the {searches} "
        f"limit-{LIMIT} ones below"
        + (", plus the fusion check's wide semantic and keyword ones)" if fusion_check else ")")
    )
    for mode, latencies in timing.search_ms.items():
        lines.append(
            f"  - {mode}: p50 {statistics.median(latencies):.1f} ms, "
            f"p99 {_percentile(latencies, 99):.1f} ms"
            + ("" if mode == "keyword" else " (the query is embedded by the provider)")
            + (
                f"; the loopback reranker answers each call after {timing.rerank_delay_ms:g} ms "
                f"({RERANK_CANDIDATES} candidates), and ordered {timing.reranked} of "
                f"{len(latencies)} searches"
                if mode == RERANKED
                else ""
            )
        )
    lines += [
        f"- machine: {os.cpu_count()} cores; the embedding server, the stack (2 workers) and "
        f"redis-server share them; load average (1 min) before the run: {load:.2f}",
        "",
        "![hit@k per mode](retrieval.png)",
        "",
        'Data: LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM '
        'Agents", ACL 2024), CC BY-NC 4.0, used for testing only.',
        "",
    ]
    return "\n".join(lines)


def _fusion_section(
    conversations: Sequence[Conversation], outcomes: Sequence[Outcome], agrees: int
) -> list[str]:
    half = len(conversations) // 2
    first = {c.sample_id for c in conversations[:half]}
    part_a = [o for o in outcomes if o.sample_id in first]
    part_b = [o for o in outcomes if o.sample_id not in first]
    names_a = ", ".join(c.sample_id for c in conversations[:half])
    names_b = ", ".join(c.sample_id for c in conversations[half:])
    lines = [
        "",
        "## Fusion check",
        "",
        f"Each rule fuses the API's semantic and keyword lists of {CANDIDATES * LIMIT} "
        f"candidates (`CANDIDATES` x limit), in this process. The store's `fuse` applied here "
        f"gave the same memories, in the same order, as the hybrid answers for {agrees} of "
        f"the {sum(o.window is None for o in outcomes)} questions that name no time (the API "
        f"ranks the others by time too, below): since the scores of issue 21 the lists carry "
        f"scores on [0, 1], not cosine and BM25, so the rules here fuse other numbers than the "
        f"store does and these rows approximate it. Split A: {names_a}; split B: {names_b}.",
        "",
        "| fusion | hit@10 A | hit@10 B | hit@10 all | hit@1 all | hit@5 all | hit@20 all |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in ["semantic", "keyword", *FUSIONS]:
        values = [
            mean_metric(part_a, row, 10, hit_at),
            mean_metric(part_b, row, 10, hit_at),
            *(mean_metric(outcomes, row, k, hit_at) for k in (10, 1, 5, 20)),
        ]
        lines.append(f"| {row} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    oracle = [_oracle_hit10(part) for part in (part_a, part_b, outcomes)]
    lines += [
        "",
        f"Oracle (not a rule: it reads the answers): choosing the store's `fuse` weight per "
        f"question afterwards, the best of {', '.join(f'{w:g}' for w in ORACLE_WEIGHTS)}, "
        f"would give hit@10 {oracle[2]:.3f} (A {oracle[0]:.3f}, B {oracle[1]:.3f}): the ceiling "
        "of any weight setting for these two lists, even one adapting to each query.",
    ]
    return lines


def _oracle_hit10(outcomes: Sequence[Outcome]) -> float:
    """Mean over ``outcomes`` of the best hit@10 among the ``ORACLE_WEIGHTS`` rows."""
    if not outcomes:
        return float("nan")
    return statistics.fmean(
        max(hit_at(o.cited[_ORACLE.format(w)], o.question.evidence, 10) for w in ORACLE_WEIGHTS)
        for o in outcomes
    )


def plot(outcomes: Sequence[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    styles = {
        "semantic": ("-o", "#4c72b0"),
        "keyword": ("-s", "#dd8452"),
        "hybrid": ("-D", "#55a868"),
        BLEND: ("--^", "#7f7f7f"),
    }
    panels = (
        (axes[0], hit_at, "hit@k (fraction of questions)"),
        (axes[1], coverage_at, "coverage@k (mean fraction of evidence turns)"),
    )
    for ax, metric, title in panels:
        for row, (style, color) in styles.items():
            values = [mean_metric(outcomes, row, k, metric) for k in KS]
            ax.plot(KS, values, style, color=color, label=row)
        ax.set_xticks(KS)
        ax.set_xlabel("k")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].plot(
        [10], [TARGET], marker="_", markersize=30, mew=3, color="#c44e52", label="target hit@10"
    )
    axes[0].set_ylabel(f"LoCoMo, categories 1-4 ({len(outcomes)} questions)")
    axes[0].legend(loc="lower right")
    fig.suptitle(f"Retrieval on LoCoMo observations, {MODEL}, through the local stack")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _commit() -> str:
    """The checked-out commit, and whether tracked files differ from it (the results then
    describe uncommitted code)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return f"`{head}`" + (" plus uncommitted changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval")
    parser.add_argument("--conversations", type=int, default=10, help="the first N (1-10)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--no-fusion-check",
        dest="fusion_check",
        action="store_false",
        help="skip the wide candidate lists and the fusion rules' comparison",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where retrieval.md and .png go")
    parser.add_argument(
        "--rows", type=Path, default=None, help="also write every result's measures here (JSON)"
    )
    parser.add_argument(
        "--rerank-delay-ms",
        type=float,
        default=RERANK_DELAY_MS,
        help="the loopback reranker's delay per call (negative: no rerank row)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    commit = _commit()  # before the run writes its results (tracked files)
    load = os.getloadavg()[0]
    conversations = load_conversations(args.data)[: max(1, args.conversations)]
    per_question = len(MODES) + (2 if args.fusion_check else 0) + (args.rerank_delay_ms >= 0)
    foreign = {
        c.sample_id: conversations[(i + 1) % len(conversations)].questions
        for i, c in enumerate(conversations)
    }
    total = sum(
        len(c.facts) + per_question * len(c.questions) + len(MODES) * len(foreign[c.sample_id])
        for c in conversations
    )
    timing = Timing(rerank_delay_ms=max(args.rerank_delay_ms, 0.0))
    outcomes: list[Outcome] = []
    scored: list[Scored] = []
    reranker = RerankServer(args.rerank_delay_ms / 1000) if args.rerank_delay_ms >= 0 else None
    if reranker is not None:
        reranker.start()
    with (
        TemporaryDirectory(prefix="bench-retrieval-") as folder,
        services(Path(folder)) as (api_url, embed_url),
        MemoryClient(api_url, API_KEY, timeout=120, max_retries=0) as memory,
        Progress("bench retrieval").stage("requests", total, "req") as bar,
    ):
        for conversation in conversations:
            bar.note(conversation.sample_id)
            more, rows = run_conversation(
                memory,
                embed_url,
                conversation,
                foreign[conversation.sample_id],
                args.fusion_check,
                timing,
                bar,
                reranker.url if reranker else None,
            )
            outcomes += more
            scored += rows
    command = "python -m bench.retrieval" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    args.out.mkdir(parents=True, exist_ok=True)
    plot(outcomes, args.out / "retrieval.png")
    text = write_report(
        conversations,
        outcomes,
        timing,
        time.monotonic() - started,
        command,
        args.fusion_check,
        load,
        commit,
        scored,
    )
    (args.out / "retrieval.md").write_text(text, encoding="utf-8")
    if args.rows is not None:
        dump(scored, args.rows)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
