"""Signals beyond the two lists, measured in ``bench.retrieval``: time in the query, and
entities (an experiment here, not in the store).

Each LoCoMo memory (an ``observation`` of one session) keeps its session's date as
``occurred_at``, as extraction keeps the date a thing was said. A question's time expression
("in May 2023", "on 16 June, 2023", "the weekend before 4th October, 2023") is resolved by the
store's own rule (``agent_memory.search.time_window``) against the conversation's last session
date, and every fused candidate whose ``occurred_at`` is inside the window has ``weight`` added
to its fused score (z-score units, ``agent_memory.search.fusion.fuse``) before the top
``limit`` is cut. The weight is chosen on split A and reported on B.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_memory.search.english import STOP_WORDS
from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.when import TimeWindow

TIME_WEIGHTS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
TIME_ROW = "time boost {:g}"
API_ROW = "hybrid"
"""The API's own hybrid answers (the store's ``TIME_BOOST``, and its fetch of each mode's best
inside the window), reported beside the rows computed here."""
ENTITY_WEIGHTS = (0.25, 0.5, 1.0, 2.0)
ENTITY_ROW = "time boost 2 + entities {:g}"
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_NUMBER = re.compile(r"\b\d+(?:[.,:]\d+)*\b")


def entities(text: str) -> frozenset[str]:
    """A text's entities by a deterministic rule (what a store would keep for a memory added
    without an extraction answer): runs of capitalised words, lower-cased, less the English stop
    words a sentence may start with ("What", "The"), and numbers."""
    found = set()
    for run in _NAME.findall(text):
        words = [w for w in run.lower().split() if w not in STOP_WORDS]
        if words:
            found.add(" ".join(words))
            found.update(words)  # "Caroline Smith" also shares "caroline"
    found.update(_NUMBER.findall(text))
    return frozenset(found)


class EntityIndex:
    """Each entity's inverse document frequency over an actor's memories,
    ``log(1 + N / df)``."""

    def __init__(self, texts: Sequence[str]) -> None:
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(entities(text))
        self._idf = {e: math.log(1 + len(texts) / df) for e, df in counts.items()}

    def share(self, query: frozenset[str], memory: frozenset[str]) -> float:
        """The idf-weighted share of the query's known entities that the memory names."""
        known = [e for e in query if e in self._idf]
        total = sum(self._idf[e] for e in known)
        if not total:
            return 0.0
        return sum(self._idf[e] for e in known if e in memory) / total


def entity_boosted(
    hits: Sequence[Hit],
    texts: Mapping[str, str],
    index: EntityIndex,
    query: str,
    weight: float,
    limit: int,
) -> list[Hit]:
    """``hits`` (z-score units, every candidate) with ``weight * share`` of the query's
    entities each memory names added, the best ``limit``."""
    asked = entities(query)
    scored = [
        Hit(h.memory_id, h.score + weight * index.share(asked, entities(texts[h.memory_id])))
        for h in hits
    ]
    return sorted(scored, key=lambda h: (-h.score, h.memory_id))[:limit]


_SESSION_DATE = re.compile(r"^session_(\d+)_date_time$")


def session_dates(conversation: Mapping[str, Any]) -> dict[int, datetime]:
    """Each session's date (``"1:56 pm on 8 May, 2023"``) by session number, UTC."""
    dates = {}
    for key, value in conversation.items():
        matched = _SESSION_DATE.match(key)
        if matched and isinstance(value, str):
            moment = datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y")
            dates[int(matched[1])] = moment.replace(tzinfo=UTC)
    return dates


def boosted(
    semantic: Sequence[Hit],
    keyword: Sequence[Hit],
    occurred: Mapping[str, int | None],
    window: TimeWindow | None,
    weight: float,
    limit: int,
    fusion: Callable[..., list[Hit]] = fuse,
) -> list[Hit]:
    """The store's fusion of every candidate, ``weight`` added to the ones whose
    ``occurred`` (ms) is inside ``window``, the best ``limit`` of that."""
    everything = fusion(semantic, keyword, len(semantic) + len(keyword))
    if window is None:
        return everything[:limit]
    scored = [
        Hit(h.memory_id, h.score + (weight if _inside(occurred.get(h.memory_id), window) else 0))
        for h in everything
    ]
    return sorted(scored, key=lambda h: (-h.score, h.memory_id))[:limit]


HitAt = Callable[[Sequence[frozenset[str]], frozenset[str], int], float]


def hit10_mean(hit_at: HitAt) -> Callable[[Sequence[Any], str], float]:
    """A function giving the mean hit@10 (``hit_at``) of a row over some outcomes (NaN for
    none): what each section's table reports."""

    def mean(chosen: Sequence[Any], row: str) -> float:
        if not chosen:
            return float("nan")
        return statistics.fmean(hit_at(o.cited[row], o.question.evidence, 10) for o in chosen)

    return mean


def entity_section(
    outcomes: Sequence[Any],
    first: set[str],
    hit_at: Callable[[Sequence[frozenset[str]], frozenset[str], int], float],
    base: str,
) -> list[str]:
    """The report's "Entities" section: each ``ENTITY_WEIGHTS`` row on A, B and all."""
    part_a = [o for o in outcomes if o.sample_id in first]
    part_b = [o for o in outcomes if o.sample_id not in first]
    mean = hit10_mean(hit_at)

    best = max(ENTITY_WEIGHTS, key=lambda w: (round(mean(part_a, ENTITY_ROW.format(w)), 6), -w))
    lines = [
        "",
        "## Entities (an experiment)",
        "",
        "Entities by a deterministic rule (`bench.retrieval_signals.entities`: runs of "
        "capitalised words less stop words, and numbers) in each memory and question; a fused "
        "candidate gets the weight times the idf-weighted share of the question's entities it "
        "names (idf over the conversation's memories), on top of the time boost. Not in the "
        "store: it ships only if it pays on both splits.",
        "",
        "| row | hit@10 A | hit@10 B | hit@10 all |",
        "|---|---|---|---|",
    ]
    for row in [base, *(ENTITY_ROW.format(w) for w in ENTITY_WEIGHTS)]:
        chosen = " (chosen on A)" if row == ENTITY_ROW.format(best) else ""
        values = [mean(part_a, row), mean(part_b, row), mean(outcomes, row)]
        lines.append(f"| {row}{chosen} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    return lines


def _inside(moment_ms: int | None, window: TimeWindow) -> bool:
    return moment_ms is not None and window.holds(moment_ms)


def section(
    outcomes: Sequence[Any],
    first: set[str],
    hit_at: Callable[[Sequence[frozenset[str]], frozenset[str], int], float],
    base: str,
) -> tuple[list[str], float]:
    """The report's "Time in the query" section and the weight chosen on A (the best hit@10
    of ``TIME_WEIGHTS`` on split A, ties to the smaller). Each outcome has ``window``, its
    question's (or None); ``base`` is the row without the signal."""
    part_a = [o for o in outcomes if o.sample_id in first]
    part_b = [o for o in outcomes if o.sample_id not in first]
    timed = [o for o in outcomes if o.window is not None]
    mean = hit10_mean(hit_at)

    rows = [base, *(TIME_ROW.format(w) for w in TIME_WEIGHTS), API_ROW]
    best = max(TIME_WEIGHTS, key=lambda w: (round(mean(part_a, TIME_ROW.format(w)), 6), -w))
    timed_a = [o for o in timed if o.sample_id in first]
    timed_b = [o for o in timed if o.sample_id not in first]
    lines = [
        "",
        "## Time in the query",
        "",
        f"{len(timed)} of {len(outcomes)} questions name a time the store's rule resolves "
        f"(`agent_memory.search.when`; A {len(timed_a)}, B {len(timed_b)}), against the "
        "conversation's last session date. Each memory keeps its session's date as "
        "`occurred_at`. A fused candidate inside the window gets the weight added to its fused "
        "score (z-score units) before the top 10 is cut; weight chosen on A. These rows fuse the "
        "API's lists by their `score`s (on [0, 1] since the scores of issue 21, a monotone "
        "function of the cosine for semantic lists but of the word coverage, not BM25, for "
        "keyword ones), so they approximate the store's fusion; the last row is the API's own "
        "hybrid answers, the store ranking with `memories.ranking.TIME_BOOST`.",
        "",
        "| row | hit@10 A | hit@10 B | hit@10 all | timed questions A | timed questions B |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        values = [
            mean(part_a, row),
            mean(part_b, row),
            mean(outcomes, row),
            mean(timed_a, row),
            mean(timed_b, row),
        ]
        chosen = " (chosen on A)" if row == TIME_ROW.format(best) else ""
        name = "hybrid, the API (the store's time signal)" if row == API_ROW else row
        lines.append(f"| {name}{chosen} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    return lines, best
