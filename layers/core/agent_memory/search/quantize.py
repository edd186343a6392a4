"""Vector scans of an ``ActorIndex``: the exact float32 dot product, the compact forms (int8
codes with a scale per row, packed sign bits) and their scores, split over threads when large.

The compact form (``search.index.COMPACT_ABOVE_BYTES``) keeps 100,000 vectors of 1,536 dimensions
within the cache's budget: int8 codes are 4x smaller than float32 and the sign bits 32x; the
Hamming distance of sign bits (Charikar, "Similarity estimation techniques from rounding
algorithms", STOC 2002) pre-filters very large actors before the int8 scores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

BLOCK = 4096
"""Rows converted or scored per step, so that temporary float32 copies stay small."""

_R = TypeVar("_R", bound=np.generic)


def bit_bytes(dimensions: int) -> int:
    """Bytes of one row of packed sign bits for ``dimensions`` dimensions."""
    return (dimensions + 7) // 8


def quantize_rows(
    block: NDArray[np.float32],
) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Symmetric int8 codes of each row of ``block`` and the row's scale (row ~= codes *
    scale; the largest magnitude maps to 127, an all-zero row gets scale 1)."""
    peak = np.abs(block).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes: NDArray[np.int8] = np.rint(block / scale[:, None]).astype(np.int8)
    return codes, scale


PARALLEL_ABOVE = 16_384
"""Int8 scoring of more rows than this is split across ``search_threads()`` threads (numpy
releases the GIL in its gathers, casts and BLAS products): 33,000 rows of 1,536 dimensions took
26 ms on one core and 15 ms on two on this project's machine."""
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


_configured_threads: int | None = None


def configure_search_threads(threads: int | None) -> None:
    """Set the threads of a large compact search (the function setting ``search_threads``,
    ``KIVIDB_SEARCH_THREADS``); None: the default of ``search_threads``."""
    global _configured_threads
    _configured_threads = threads if threads is not None and threads > 0 else None


def search_threads() -> int:
    """Threads a large compact search uses: the configured number
    (``configure_search_threads``) when there is one, else the CPUs this process may run on,
    at most 4. Lambda gives a function more than one vCPU above 1,769 MB of memory
    (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html); with one, the
    split is skipped."""
    if _configured_threads is not None:
        return _configured_threads
    return max(1, min(4, len(os.sched_getaffinity(0))))


def _threads_for(rows: int, min_rows: int) -> tuple[int, ThreadPoolExecutor | None]:
    """How many threads a step over ``rows`` rows uses (one up to ``min_rows``), and the pool
    for the extra ones."""
    global _pool, _pool_size
    threads = search_threads()
    if threads == 1 or rows <= min_rows:
        return 1, None
    with _pool_lock:
        if _pool is None or _pool_size != threads - 1:
            _pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="search")
            _pool_size = threads - 1
        return threads, _pool


def parallel(
    step: Callable[..., NDArray[_R]],
    split: NDArray[Any],
    *rest: Any,
    min_rows: int | None = None,
) -> NDArray[_R]:
    """``step(split, *rest)`` computed over parts of ``split`` (its first axis) on
    ``search_threads()`` threads when it has more than ``min_rows`` rows (default
    ``PARALLEL_ABOVE``), the calling thread doing the first part; the parts' results
    concatenated in order."""
    threads, pool = _threads_for(split.shape[0], PARALLEL_ABOVE if min_rows is None else min_rows)
    if pool is None:
        return step(split, *rest)
    parts = np.array_split(split, threads)
    others = [pool.submit(step, part, *rest) for part in parts[1:]]
    first = step(parts[0], *rest)
    return np.concatenate([first, *(future.result() for future in others)])


def parallel_int8_scores(
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    rows: NDArray[np.intp],
    query: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``int8_scores`` of ``rows``, split over threads when there are many."""
    return parallel(lambda part: int8_scores(codes, scales, part, query), rows)


EXACT_PARALLEL_BYTES = 16 * 1024 * 1024
"""An exact float32 scan over more than this many bytes of vectors is split over the search
threads: 10,000 x 1,536 took 2.4 ms on one core and 1.3 ms on two here (10,000 x 384, 15 MB,
gains little: 0.57 -> 0.49 ms)."""


def exact_rows(query: NDArray[np.float32]) -> int:
    """Rows of an exact scan above which it is split over threads (``EXACT_PARALLEL_BYTES``)."""
    return max(1, EXACT_PARALLEL_BYTES // max(1, query.nbytes))


def dot(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """Exact cosines of the unit rows of ``matrix`` with the unit vector ``query``."""
    scores: NDArray[np.float32] = matrix @ query
    return scores


def hamming(bits: NDArray[np.uint8], query_bits: NDArray[np.uint8]) -> NDArray[np.uint16]:
    """Hamming distance of each row of packed sign ``bits`` to ``query_bits`` (64 bits at a
    time when the rows allow it)."""
    if bits.shape[1] % 8 == 0:
        words = np.ascontiguousarray(bits).view(np.uint64) ^ query_bits.view(np.uint64)
        distance: NDArray[np.uint16] = np.bitwise_count(words).sum(axis=1, dtype=np.uint16)
        return distance
    distance = np.bitwise_count(bits ^ query_bits).sum(axis=1, dtype=np.uint16)
    return distance


def int8_scores(
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    rows: NDArray[np.intp],
    query: NDArray[np.float32],
) -> NDArray[np.float32]:
    """Approximate cosines of ``rows`` from int8 codes, in blocks so that the float32 copy
    numpy needs for its BLAS product stays small (``BLOCK`` rows at a time)."""
    scores = np.empty(rows.size, dtype=np.float32)
    buffer = np.empty((min(BLOCK, rows.size), codes.shape[1]), dtype=np.float32)
    for start in range(0, rows.size, BLOCK):
        chunk = rows[start : start + BLOCK]
        block = buffer[: chunk.size]
        np.copyto(block, codes[chunk], casting="unsafe")
        scores[start : start + chunk.size] = (block @ query) * scales[chunk]
    return scores
