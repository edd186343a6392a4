"""Ranking memories for a query over one or more actors' indexes: semantic, keyword, hybrid.

``rank`` asks each actor's index (``memories.indexes.ActorIndexes``) for its best candidates, makes
a compact index's semantic candidates exact (``ActorIndexes.rescore``), then orders them: by
cosine (semantic), by BM25 (keyword), or by ``search.fusion.fuse`` of the two lists (hybrid), where
each mode contributes ``CANDIDATES * limit`` candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from agent_memory.memories.indexes import ActorIndexes
from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.selection import Selection

CANDIDATES = 5
"""Each mode of a hybrid search contributes ``CANDIDATES * limit`` candidates to the fusion."""


@dataclass(frozen=True)
class Ranked:
    """One ranked memory: its hit (id and score) and the actor bucket that holds it."""

    hit: Hit
    bucket: str


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
    for bucket in buckets:
        index = indexes.index(bucket, *(generations or {}).get(bucket, (None, None)))
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
    return [Ranked(hit, owner[hit.memory_id]) for hit in hits]
