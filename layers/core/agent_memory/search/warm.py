"""A container's first search, done on made-up data before any request needs it.

The first search of a process pays for more than its own work: numpy's first BLAS product and
first ``argpartition``, ``bitwise_count``, ``packbits`` and ``unique`` (which imports
``numpy.ma``), the tokenizer's and
BM25's first calls, the kept form's first ``frombuffer`` and JSON reads. ``warm_search`` runs
every one of those paths once on a small index of made-up vectors and texts (exact and compact,
semantic, keyword and fused, a kept form dumped and read back), so that under Lambda SnapStart
(``edge.snapstart``) they are done before the snapshot and no restored container's first
request pays them. Nothing it builds is kept: no user data, no connection, no secret.
"""

from __future__ import annotations

import numpy as np

from agent_memory.search import snapshot
from agent_memory.search.fusion import fuse
from agent_memory.search.index import ActorIndex
from agent_memory.search.measures import cosines, coverages
from agent_memory.search.quantize import hamming
from agent_memory.search.query import Query

WARM_ROWS = 64
"""Rows of the made-up index (past ``index.PREFILTER_ABOVE`` is not needed: the pre-filter's
functions are called directly)."""
WARM_DIMENSIONS = 384
"""Dimensions of its vectors (the smallest the stores use; BLAS and numpy's dispatch are the
same code at any size)."""
_WORDS = ("coffee", "morning", "prefers", "tea", "travel", "berlin", "meeting", "notes")


def _made_up(rows: int, dimensions: int) -> ActorIndex:
    """An index of ``rows`` unit vectors from a fixed seed, each with a two-word text."""
    rng = np.random.default_rng(0)  # fixed: nothing random about it survives into a request
    vectors = rng.standard_normal((rows, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ActorIndex(dimensions=dimensions)
    ids = [f"mem_{n:020x}" for n in range(rows)]
    texts = [f"{_WORDS[n % len(_WORDS)]} {_WORDS[(n * 3 + 1) % len(_WORDS)]}" for n in range(rows)]
    index.add_many(ids, vectors, texts, ["fact"] * rows, list(range(rows)), [0] * rows)
    return index


def warm_search(rows: int = WARM_ROWS, dimensions: int = WARM_DIMENSIONS) -> int:
    """Run each search path once on a made-up index (see the module docstring); the number of
    hits found in all, which is more than 0 when every path answered."""
    np.unique(np.array([2, 1]))  # numpy's first unique (under isin) imports numpy.ma: 40 ms
    index = _made_up(rows, dimensions)
    query = index.matrix[1].copy()
    found = 0
    semantic = index.semantic(query, 10, 1, None)
    keyword = index.keyword(Query("coffee in the morning"), 10, 1, None)
    found += len(fuse(semantic, keyword, 10)) + len(index.best_match(query, 1))
    # The compact form (int8 codes, sign bits) as a kept form read back gives it, with the
    # pre-filter's Hamming distance and the int8 scores called once each.
    parts = snapshot.dump(index)
    kept = snapshot.load(parts, dimensions)
    if kept is not None:
        found += len(kept.semantic(query, 10, 1, None))
        kept._know_bits()
        found += int(hamming(kept.bits[:rows], np.packbits(query > 0)).size > 0)
        found += len(kept.keyword(Query("tea"), 10, 1, None))
        picked = [h.memory_id for h in semantic[:3]]
        found += len(cosines(kept, query, picked)) + len(coverages(kept, Query("tea"), picked))
    return found
