"""The int8 codes of an actor's kept index, read from the database when a search or a change
needs them (``search.snapshot`` format 4: a new container reads the kept form up to its codes;
``memories.indexes.ActorIndexes`` hands its index one of these as ``codes_source``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from agent_memory.database.client import database_errors
from agent_memory.database.keys import ActorKeys
from agent_memory.database.scripts import load_script
from agent_memory.memories.records import split_memory
from agent_memory.memories.scripts import KEPT_CODES
from agent_memory.search import snapshot
from agent_memory.search.quantize import quantize_rows

VECTOR_BATCH = 2000
"""Stored vectors read per ``HMGET`` when codes are quantized from them (the fallback)."""


class KeptCodes:
    """The int8 codes of an actor's kept form (format 4, ``search.snapshot``), read from the
    database when needed (``search.columns.CodeSource``): some rows' in one script
    (``scripts.KEPT_CODES``: a ``GETRANGE`` each, with the form's header), or all of them (one
    ``GETRANGE`` per part) in a pipeline that reads the header before and after them. When the
    header is not ``head_bytes`` (another container kept the index again meanwhile, numbering
    rows anew; the keep is one script, so a header unchanged on both sides of the pipeline, or
    read in the same script, means the codes are of this form), the codes are made from the
    rows' stored float32 vectors instead (``quantize_rows``), which are always right.

    Why a script for rows: it answers one array that hiredis reads in C, where a pipeline of a
    thousand ``GETRANGE`` costs redis-py a thousand packings and replies: 8 against 16 ms for
    1,000 rows of 1,536 codes on this project's machine (a script that joined the ranges
    into one string in Lua took 22 ms, and is why an earlier version kept the pipeline)."""

    def __init__(
        self, binary: Any, actor: ActorKeys, head: dict[str, Any], head_bytes: bytes
    ) -> None:
        self._binary = binary
        self._script = load_script(binary, KEPT_CODES)
        self._actor = actor
        self._part_numbers = {key: n for n, key in enumerate(actor.index_parts, start=1)}
        """Each part's key -> its place in ``KEPT_CODES``'s KEYS (1-based)."""
        self._head = head_bytes
        self._offset, self._width = snapshot.code_span(head)
        self._rows = int(head["rows"])
        self.ids: list[str | None] | None = None  # the index's ids, for the fallback

    def _ranges(self, start: int, length: int) -> list[tuple[str, int, int]]:
        """``(part key, first, last)`` byte ranges (inclusive) of ``length`` bytes from
        ``start`` of the whole form, one per part they fall in."""
        found = []
        at, end = start, start + length
        while at < end:
            part = at // snapshot.PART_BYTES
            stop = min(end, (part + 1) * snapshot.PART_BYTES)
            base = part * snapshot.PART_BYTES
            found.append((self._actor.index_parts[part], at - base, stop - 1 - base))
            at = stop
        return found

    def _read(self, spans: list[list[tuple[str, int, int]]]) -> list[bytes] | None:
        """The bytes of each span (its ranges joined), read between two reads of the header;
        None when the header changed (or a range came back short)."""
        with database_errors():
            pipe = self._binary.pipeline(transaction=False)
            pipe.getrange(self._actor.index_parts[0], 0, len(self._head) - 1)
            for ranges in spans:
                for key, first, last in ranges:
                    pipe.getrange(key, first, last)
            pipe.getrange(self._actor.index_parts[0], 0, len(self._head) - 1)
            answers = pipe.execute()
        if answers[0] != self._head or answers[-1] != self._head:
            return None
        found, at = [], 1
        for ranges in spans:
            chunk = b"".join(answers[at : at + len(ranges)])
            at += len(ranges)
            if len(chunk) != sum(last - first + 1 for _, first, last in ranges):
                return None
            found.append(chunk)
        return found

    def rows(self, rows: NDArray[np.intp]) -> NDArray[np.int8]:
        """The codes of ``rows`` (``search.columns.CodeSource.rows``)."""
        picked = rows.tolist()
        found = self._read_rows(picked) if all(0 <= r < self._rows for r in picked) else None
        if found is None:
            return self._from_vectors(picked)
        return np.frombuffer(found, dtype=np.int8).reshape(len(picked), self._width)

    def _read_rows(self, picked: list[int]) -> bytes | None:
        """The codes of rows ``picked``, joined in order (``scripts.KEPT_CODES``); None when
        the header changed (or a range came back short)."""
        args: list[int] = [len(self._head)]
        for row in picked:
            for key, first, last in self._ranges(self._offset + row * self._width, self._width):
                args += (self._part_numbers[key], first, last)
        with database_errors():
            answers = self._script(keys=self._actor.index_parts, args=args)
        if not answers or answers[0] != self._head:
            return None
        found = b"".join(answers[1:])
        return found if len(found) == len(picked) * self._width else None

    def all(self) -> NDArray[np.int8]:
        """Every row's codes (``search.columns.CodeSource.all``)."""
        found = self._read([self._ranges(self._offset, self._rows * self._width)])
        if found is None:
            return self._from_vectors(list(range(self._rows)))
        return np.frombuffer(found[0], dtype=np.int8).reshape(self._rows, self._width)

    def _from_vectors(self, rows: list[int]) -> NDArray[np.int8]:
        """The codes of ``rows`` quantized from their stored float32 vectors (a row whose
        vector is gone gets zeros: it scores 0, and the exact rescoring drops it)."""
        codes = np.zeros((len(rows), self._width), dtype=np.int8)
        ids = self.ids or []
        named = [(n, ids[r]) for n, r in enumerate(rows) if r < len(ids) and ids[r] is not None]
        for start in range(0, len(named), VECTOR_BATCH):
            batch = named[start : start + VECTOR_BATCH]
            with database_errors():
                raws = self._binary.hmget(self._actor.memories, [i for _, i in batch])
            for (n, _), raw in zip(batch, raws, strict=True):
                blob = split_memory(raw)[1] if raw is not None else None
                if blob is not None and len(blob) == self._width * 4:
                    vector = np.frombuffer(blob, dtype=np.float32)[None, :]
                    codes[n] = quantize_rows(vector)[0][0]
        return codes
