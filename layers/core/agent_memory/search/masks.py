"""Which rows of an ``ActorIndex`` a read considers, and the best of them: the rules of
``search.selection.Selection`` as boolean masks over the index's columns, in the same three
parts as ``Selection.admits`` (time, ranges, filter terms), and the top of a scored mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.columns import IndexColumns
from agent_memory.search.fusion import Hit
from agent_memory.search.selection import NEVER, UNKNOWN, Selection


def eligible(
    index: IndexColumns, now_ms: int, where: Selection | Sequence[str] | None
) -> NDArray[np.bool_]:
    """The rows ``where`` selects (``search.selection.Selection.admits``, for every row at once,
    in the same three parts); a sequence of types or None stands for the current memories of
    those types."""
    selection = (
        where if isinstance(where, Selection) else Selection(types=tuple(where) if where else None)
    )
    size = len(index.ids)
    expires = index.expires[:size]
    mask = index.alive[:size] & (expires > now_ms) & _in_time(index, selection, size)
    if selection.types:
        wanted = set(selection.types)
        mask &= np.fromiter((t in wanted for t in index.types), dtype=np.bool_, count=size)
    return mask & _in_ranges(index, selection, size) & _with_terms(index, selection, size)


def _in_time(index: IndexColumns, selection: Selection, size: int) -> NDArray[np.bool_]:
    """``Selection._admits_in_time`` of every row."""
    if selection.as_of is None:
        if selection.include_superseded:
            return np.ones(size, dtype=np.bool_)
        return np.asarray(index.valid_until[:size] == NEVER)
    moment = selection.as_of
    mask = (index.valid_from[:size] <= moment) & (index.expires[:size] > moment)
    if not selection.include_superseded:
        mask &= index.valid_until[:size] > moment
    return np.asarray(mask)


def _in_ranges(index: IndexColumns, selection: Selection, size: int) -> NDArray[np.bool_]:
    """``Selection._admits_ranges`` of every row."""
    mask = np.ones(size, dtype=np.bool_)
    created = index.created[:size]
    if selection.created_after is not None:
        mask &= created >= selection.created_after
    if selection.created_before is not None:
        mask &= created < selection.created_before
    if selection.wants_occurred:
        occurred = index.occurred[:size]
        mask &= occurred != UNKNOWN
        if selection.occurred_after is not None:
            mask &= occurred >= selection.occurred_after
        if selection.occurred_before is not None:
            mask &= occurred < selection.occurred_before
    return mask


def _with_terms(index: IndexColumns, selection: Selection, size: int) -> NDArray[np.bool_]:
    """``Selection._admits_terms`` of every row."""
    mask = np.ones(size, dtype=np.bool_)
    if selection.topics:
        rows: set[int] = set()
        for term in selection.topic_terms:
            rows |= index.filter_rows.get(term, set())
        mask &= _rows_mask(rows, size)
    for term in selection.metadata_terms:
        mask &= _rows_mask(index.filter_rows.get(term, set()), size)
    return mask


def _rows_mask(rows: set[int], size: int) -> NDArray[np.bool_]:
    mask = np.zeros(size, dtype=np.bool_)
    if rows:
        mask[np.fromiter(rows, dtype=np.intp, count=len(rows))] = True
    return mask


def top(
    scores: NDArray[np.float32],
    mask: NDArray[np.bool_],
    limit: int,
    ids: Sequence[str | None],
) -> list[Hit]:
    """The ``limit`` best rows of ``mask`` by ``scores`` as hits (``ids[row]``, score), best
    first; rows tied with the last one kept are all compared, and ties are cut by memory id,
    so that two indexes holding the same memories in other rows answer alike."""
    candidates = np.flatnonzero(mask)
    if candidates.size == 0:
        return []
    picked = scores[candidates]
    if candidates.size > limit:
        part = np.argpartition(-picked, limit - 1)[:limit]
        # Every row tied with the last one kept stays in, so that ties are cut by id below and
        # two indexes of the same memories (rows in another order) answer alike.
        tied = picked >= picked[part].min()
        candidates, picked = candidates[tied], picked[tied]
    found = sorted(
        zip((-picked).tolist(), [str(ids[row]) for row in candidates.tolist()], strict=True)
    )
    return [Hit(memory_id, -negative) for negative, memory_id in found[:limit]]
