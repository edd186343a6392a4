"""Ranking memories for a query over one or more actors' indexes: semantic, keyword, hybrid.

``rank`` asks each actor's index (``memories.indexes.ActorIndexes``) for its best candidates, makes
a compact index's semantic candidates exact (``ActorIndexes.rescore``), then picks the best
``limit``: by cosine (semantic), by BM25 (keyword), or by ``search.fusion.fuse`` of the two lists
(hybrid), where each mode contributes ``CANDIDATES * limit`` candidates. Each one picked is then
scored on [0, 1] (``search.scores.relevance`` of its cosine and its coverage of the query's
words, ``search.measures``). The order stays the mode's: a semantic search's score rises with
its cosine, but a keyword or hybrid result may score above one ranked before it (the ranking
uses BM25 or the fusion; the score is an absolute estimate, comparable across queries).

When the query names a time (``search.when.TimeWindow``), every mode takes ``CANDIDATES *
limit`` candidates, and as many more from inside the window (so that a memory of that time
ranked far below is still one), their scores in z-score units (the fusion's, or the mode's
list standardised alone), and a memory whose ``occurred_at`` is inside the window has
``TIME_BOOST`` added before the best ``limit`` are cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from agent_memory.clock import to_ms
from agent_memory.memories.indexes import ActorIndexes
from agent_memory.search.fusion import FUSION_WEIGHT, Hit, fuse
from agent_memory.search.index import ActorIndex
from agent_memory.search.measures import cosines, coverages
from agent_memory.search.query import Query
from agent_memory.search.scores import relevance
from agent_memory.search.selection import Selection
from agent_memory.search.when import TimeWindow

CANDIDATES = 5
"""Each mode of a hybrid search contributes ``CANDIDATES * limit`` candidates to the fusion."""
TIME_BOOST = 2.0
"""Added, in z-score units, to the fused score of a candidate inside the query's time window.
Chosen on LoCoMo conversations A alone, the best hybrid hit@10 of 0.25 to 3 there (ties to the
smaller; ``bench/retrieval_signals.py``, results in ``bench/results/retrieval.md``, "Time in
the query")."""


@dataclass(frozen=True)
class Ranked:
    """One ranked memory: its hit (id and score on [0, 1]), the actor bucket that holds it, and
    its cosine with the query vector (None without one)."""

    hit: Hit
    bucket: str
    similarity: float | None = None


def rank(
    indexes: ActorIndexes,
    buckets: Sequence[str],
    query: Query,
    limit: int,
    selection: Selection,
    now_ms: int,
    generations: Mapping[str, tuple[int, int]] | None = None,
) -> list[Ranked]:
    """The best ``limit`` memories of ``buckets`` for ``query`` (its unit vector for the
    semantic side, none for keyword only; its tokens for the keyword side), best first, among
    the live memories ``selection`` admits (filters apply before the top ``limit`` is cut).
    ``generations``: the ``(gen, kept)`` the caller has just read for some of the buckets
    (``ActorIndexes.index``). The time the query names (``query.window``) ranks its memories
    higher (``TIME_BOOST``)."""
    vector, mode, window = query.vector, query.mode, query.window
    wide = limit * CANDIDATES if mode == "hybrid" or window is not None else limit
    semantic: list[tuple[Hit, str]] = []
    keyword: list[tuple[Hit, str]] = []
    held: dict[str, ActorIndex] = {}
    # With a time named, each mode also fetches its best inside the window, so that a memory
    # of that time ranked below the wide lists is still a candidate.
    selections = [selection] if window is None else [selection, within(selection, window)]
    for bucket in buckets:
        index = indexes.index(bucket, *(generations or {}).get(bucket, (None, None)))
        held[bucket] = index
        near: list[Hit] = []
        with index.lock:
            for chosen in selections:
                if vector is not None and query.semantic:
                    near += index.semantic(vector, wide, now_ms, chosen)
                if query.keywords:
                    found = index.keyword(query, wide, now_ms, chosen)
                    keyword += [(h, bucket) for h in found]
            exact = index.exact
        if window is not None:  # the window's best may be among the first list's too
            near = list({h.memory_id: h for h in near}.values())
        if vector is not None and not exact:
            near = indexes.rescore(bucket, near, vector)
        semantic += [(h, bucket) for h in near]
    if window is not None:
        keyword = list({h.memory_id: (h, b) for h, b in keyword}.values())
    owner = {h.memory_id: b for h, b in semantic + keyword}
    sem = sorted((h for h, _ in semantic), key=lambda h: -h.score)[: wide * len(selections)]
    key = sorted((h for h, _ in keyword), key=lambda h: -h.score)[: wide * len(selections)]
    if window is not None:
        weight = {"semantic": 1.0, "keyword": 0.0}.get(mode, FUSION_WEIGHT)
        everything = fuse(sem, key, len(sem) + len(key), weight)
        hits = _in_time_first(held, owner, everything, window)[:limit]
    elif mode == "semantic":
        hits = sem[:limit]
    elif mode == "keyword":
        hits = key[:limit]
    else:
        hits = fuse(sem[:wide], key[:wide], limit)
    cosine = {h.memory_id: h.score for h, _ in semantic}
    return _scored(held, hits, owner, cosine, query)


def within(selection: Selection, window: TimeWindow) -> Selection:
    """``selection`` narrowed to memories whose ``occurred_at`` is inside ``window``."""
    start, end = to_ms(window.start), to_ms(window.end)
    after, before = selection.occurred_after, selection.occurred_before
    return replace(
        selection,
        occurred_after=start if after is None else max(after, start),
        occurred_before=end if before is None else min(before, end),
    )


def _in_time_first(
    held: Mapping[str, ActorIndex],
    owner: Mapping[str, str],
    hits: Sequence[Hit],
    window: TimeWindow,
) -> list[Hit]:
    """``hits`` (z-score units) with ``TIME_BOOST`` added to those whose ``occurred_at`` is
    inside ``window``, best first (ties by id, as ``fuse`` orders them)."""
    start, end = to_ms(window.start), to_ms(window.end)
    inside: set[str] = set()
    for bucket in {owner[h.memory_id] for h in hits}:
        index = held[bucket]
        with index.lock:
            for hit in hits:
                row = index.rows.get(hit.memory_id) if owner[hit.memory_id] == bucket else None
                if row is not None and start <= int(index.occurred[row]) < end:
                    inside.add(hit.memory_id)
    boosted = [Hit(h.memory_id, h.score + TIME_BOOST * (h.memory_id in inside)) for h in hits]
    return sorted(boosted, key=lambda h: (-h.score, h.memory_id))


def _scored(
    held: Mapping[str, ActorIndex],
    hits: Sequence[Hit],
    owner: Mapping[str, str],
    exact: Mapping[str, float],
    query: Query,
) -> list[Ranked]:
    """``hits``, in their order, scored by ``search.scores.relevance`` of the measures the
    query's mode uses: the cosine (``exact`` where the semantic side computed it, else from the
    index) unless keyword only, the coverage of the query's words unless semantic."""
    vector = query.vector
    by_bucket: dict[str, list[str]] = {}
    for hit in hits:
        by_bucket.setdefault(owner[hit.memory_id], []).append(hit.memory_id)
    similarity: dict[str, float] = {}
    covered: dict[str, float] = {}
    for bucket, ids in by_bucket.items():
        index = held[bucket]
        with index.lock:
            if vector is not None and query.semantic:
                similarity.update(cosines(index, vector, [i for i in ids if i not in exact]))
            if query.keywords:
                covered.update(coverages(index, query, ids))
    similarity.update({i: exact[i] for i in owner if i in exact})
    ranked = []
    for hit in hits:
        cosine = similarity.get(hit.memory_id) if vector is not None else None
        share = covered.get(hit.memory_id, 0.0) if query.keywords else None
        score = Hit(hit.memory_id, relevance(cosine, share))
        ranked.append(Ranked(score, owner[hit.memory_id], cosine))
    return ranked
