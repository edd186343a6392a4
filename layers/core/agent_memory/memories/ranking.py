"""Ranking memories for a query over one or more actors' indexes: semantic, keyword, hybrid.

``rank`` asks each actor's index (``memories.indexes.ActorIndexes``) for its best candidates, makes
a compact index's semantic candidates exact (``ActorIndexes.rescore``), then picks the best
``limit``: by cosine (semantic), by BM25 (keyword), or by ``search.fusion.fuse`` of the two lists
(hybrid), where each mode contributes ``CANDIDATES * limit`` candidates. Each one picked is then
scored on [0, 1] (``search.scores.relevance`` of its cosine and its coverage of the query's
words, ``search.measures``). The order stays the mode's: a semantic search's score rises with
its cosine, but a keyword or hybrid result may score above one ranked before it (the ranking
uses BM25 or the fusion; the score is an absolute estimate, comparable across queries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from agent_memory.memories.indexes import ActorIndexes
from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.index import ActorIndex
from agent_memory.search.measures import cosines, coverages
from agent_memory.search.scores import relevance
from agent_memory.search.selection import Selection

CANDIDATES = 5
"""Each mode of a hybrid search contributes ``CANDIDATES * limit`` candidates to the fusion."""


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
    query: str,
    vector: NDArray[np.float32] | None,
    mode: str,
    limit: int,
    selection: Selection,
    now_ms: int,
    generations: Mapping[str, tuple[int, int]] | None = None,
) -> list[Ranked]:
    """The best ``limit`` memories of ``buckets`` for ``query`` (its unit ``vector`` for the
    semantic side, None for keyword only), best first, among the live memories ``selection``
    admits (filters apply before the top ``limit`` is cut). ``generations``: the ``(gen,
    kept)`` the caller has just read for some of the buckets (``ActorIndexes.index``)."""
    wide = limit * CANDIDATES if mode == "hybrid" else limit
    semantic: list[tuple[Hit, str]] = []
    keyword: list[tuple[Hit, str]] = []
    held: dict[str, ActorIndex] = {}
    for bucket in buckets:
        index = indexes.index(bucket, *(generations or {}).get(bucket, (None, None)))
        held[bucket] = index
        with index.lock:
            near: list[Hit] = []
            if vector is not None and mode != "keyword":
                near = index.semantic(vector, wide, now_ms, selection)
            exact = index.exact
            if mode != "semantic":
                keyword += [(h, bucket) for h in index.keyword(query, wide, now_ms, selection)]
        if vector is not None and not exact:
            near = indexes.rescore(bucket, near, vector)[:wide]
        semantic += [(h, bucket) for h in near]
    owner = {h.memory_id: b for h, b in semantic + keyword}
    if mode == "semantic":
        hits = sorted((h for h, _ in semantic), key=lambda h: -h.score)[:limit]
    elif mode == "keyword":
        hits = sorted((h for h, _ in keyword), key=lambda h: -h.score)[:limit]
    else:
        sem = sorted((h for h, _ in semantic), key=lambda h: -h.score)[:wide]
        key = sorted((h for h, _ in keyword), key=lambda h: -h.score)[:wide]
        hits = fuse(sem, key, limit)
    cosine = {h.memory_id: h.score for h, _ in semantic}
    return _scored(held, hits, owner, cosine, query, vector, mode)


def _scored(
    held: Mapping[str, ActorIndex],
    hits: Sequence[Hit],
    owner: Mapping[str, str],
    exact: Mapping[str, float],
    query: str,
    vector: NDArray[np.float32] | None,
    mode: str,
) -> list[Ranked]:
    """``hits``, in their order, scored by ``search.scores.relevance`` of the measures ``mode``
    uses: the cosine (``exact`` where the semantic side computed it, else from the index)
    unless keyword only, the coverage of ``query`` unless semantic."""
    by_bucket: dict[str, list[str]] = {}
    for hit in hits:
        by_bucket.setdefault(owner[hit.memory_id], []).append(hit.memory_id)
    similarity: dict[str, float] = {}
    covered: dict[str, float] = {}
    for bucket, ids in by_bucket.items():
        index = held[bucket]
        with index.lock:
            if vector is not None and mode != "keyword":
                similarity.update(cosines(index, vector, [i for i in ids if i not in exact]))
            if mode != "semantic":
                covered.update(coverages(index, query, ids))
    similarity.update({i: exact[i] for i in owner if i in exact})
    ranked = []
    for hit in hits:
        cosine = similarity.get(hit.memory_id) if vector is not None else None
        share = covered.get(hit.memory_id, 0.0) if mode != "semantic" else None
        score = Hit(hit.memory_id, relevance(cosine, share))
        ranked.append(Ranked(score, owner[hit.memory_id], cosine))
    return ranked
