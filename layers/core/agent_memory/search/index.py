"""In-memory search over one actor's memories: exact cosine and BM25 keywords.

An ``ActorIndex`` holds, for the memories of one actor (or one store's memories without an
actor), unit-length float32 vectors in one matrix, and an inverted index for BM25. It is built
from Redis and then kept in step with it by ``memories.indexes.ActorIndexes``, which applies the
actor's change log instead of reloading (so a warm search fetches no vector it already has).

Scores:
- semantic: cosine similarity of unit vectors, i.e. a dot product (exact, float32; the scans
  and the compact form are in ``quantize``);
- keyword: BM25 over the memories' texts, with their topics and metadata values below them
  (BM25F), in ``search.keyword``;
- hybrid: ``search.fusion.fuse``, see its docstring.

The container's cache of these indexes is ``search.cache.IndexCache``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.columns import IndexColumns, Known
from agent_memory.search.fusion import Hit
from agent_memory.search.kept_postings import KeptPostings
from agent_memory.search.keyword import keyword_hits
from agent_memory.search.masks import eligible, top
from agent_memory.search.quantize import (
    BLOCK,
    bit_bytes,
    dot,
    exact_rows,
    hamming,
    parallel,
    parallel_int8_scores,
    quantize_rows,
)
from agent_memory.search.query import Query, tokens_of
from agent_memory.search.selection import CURRENT, NEVER, UNKNOWN, RowFacts, Selection
from agent_memory.search.tokenizer import term_counts

COMPACT_ABOVE_BYTES = 128 * 1024 * 1024
"""An actor whose float32 vectors would take more than this is held compactly instead: int8
codes with a scale per row (4x smaller) and packed sign bits (32x smaller) for a pre-filter.
Its semantic results are then candidates that the caller rescores exactly (``exact`` False)."""


PREFILTER_ABOVE = 20_000
"""Compact actors with more rows than this are pre-filtered by the Hamming distance of sign bits
(Charikar, "Similarity estimation techniques from rounding algorithms", STOC 2002) before the
int8 scores; smaller ones are scored in int8 directly."""
FETCHED_CANDIDATES = 1000
"""Rows an index read without its int8 codes (``codes_source``) pre-filters by sign bits, at
any size, and whose codes it fetches for one search (at least 20 per result): the first search
of a new container reads about 1.5 KB a candidate at 1,536 dimensions instead of every row's
codes (1,000 rows: 26 ms against 78 to 100 ms for all 10,000, on this project's loaded
machine). On the clustered vectors of ``bench.cold_start`` the exact top ten of 50 queries were
all among the 800 nearest by Hamming distance at 100,000 memories (and the 100 nearest at
10,000); the candidates' int8 scores, then the exact ones, order them
(tests/unit/test_kept_codes.py)."""
ERROR_WINDOW = 12.0
"""Standard deviations of int8 rounding error within which a compact search's candidates are
all rescored (``ActorIndex._rescored``)."""
RESCORED_AT_MOST = 1000
"""Candidates one compact search rescores at most, however close their scores."""
PREFILTER_KEEP_DIVISOR = 3
"""The pre-filter keeps a third of the rows (at least 2,000 and 50 per result): on clustered
1,536-dimension data that keeps about 99% of the exact top ten among the int8 candidates, whose
exact rescoring then orders them exactly (see tests/unit/test_search.py)."""


@dataclass
class ActorIndex(IndexColumns):
    """An actor's index (``search.columns.IndexColumns``) with what keeps it up (adding,
    replacing and removing memories, the compact form) and what searches it (semantic,
    keyword, the best match for deduplication)."""

    # --- maintenance -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def nbytes(self) -> int:
        """Approximate memory held, in bytes (what the cache's budget counts): the arrays,
        the posting and row-token arrays (6 bytes an entry, 4 a row token, ~70 each array
        object), the vocabulary (~120 a token), the ids (~150 a row: the string and its
        two references), the filter terms (~100 a term and row, ~200 a distinct term) and the
        records held (their bytes and ~33 a bytes object)."""
        vectors = self.matrix.nbytes + self.codes.nbytes + self.scales.nbytes + self.bits.nbytes
        columns = self.expires.nbytes + self.created.nbytes + self.alive.nbytes
        columns += self.doclen.nbytes + self.valid_from.nbytes + self.valid_until.nbytes
        columns += self.occurred.nbytes
        entries = self._posting_entries
        keyword = entries * 6 + entries * 4 + len(self.posting_rows) * (2 * 70 + 120)
        keyword += len(self.row_tokens) * 70
        filters = self._filter_entries * 100 + len(self.filter_rows) * 200
        records = self._record_bytes + len(self.records) * 8 + len(self.rows) * 33
        return int(vectors + columns + keyword + filters + records + len(self.ids) * 150)

    def reserve(self, rows: int) -> None:
        """Capacity for exactly ``rows`` rows when it has less (a cold load knows its size)."""
        if rows > self.expires.shape[0]:
            self._resize_to(rows)

    def _reserve(self, rows: int) -> None:
        """Capacity for at least ``rows`` rows, growing by half (a quarter once compact, where
        the spare rows are most of the budget), going compact past the threshold."""
        if rows <= self.expires.shape[0]:
            return
        factor = 1.25 if self.compact else 1.5
        capacity = max(16, self.expires.shape[0])
        while capacity < rows:
            capacity = int(capacity * factor) + 1
        self._resize_to(capacity)

    def _grow(self) -> int:
        if self.free:
            return self.free.pop()
        row = len(self.ids)
        if row >= self.expires.shape[0]:
            self._reserve(row + 1)
        self.ids.append(None)
        self.records.append(None)
        self.types.append("")
        self.row_tokens.append(None)
        self.row_filters.append(())
        return row

    def _resize_to(self, capacity: int) -> None:
        limit = self.compact_above_bytes or COMPACT_ABOVE_BYTES
        if not self.compact and capacity * self.dimensions * 4 > limit:
            self._go_compact()
        if self.compact:
            self.ensure_codes()
            self.codes = _resize(self.codes, (capacity, self.dimensions))
            self.scales = _resize(self.scales, (capacity,))
            self.bits = _resize(self.bits, (capacity, self.bits.shape[1]))
        else:
            self.matrix = _resize(self.matrix, (capacity, self.dimensions))
        self.expires = _resize(self.expires, (capacity,))
        self.created = _resize(self.created, (capacity,))
        self.alive = _resize(self.alive, (capacity,))
        self.doclen = _resize(self.doclen, (capacity,))
        self.valid_from = _resize(self.valid_from, (capacity,))
        self.valid_until = _resize(self.valid_until, (capacity,))
        self.occurred = _resize(self.occurred, (capacity,))

    def upsert(
        self,
        memory_id: str,
        vector: NDArray[np.float32],
        text: str,
        memory_type: str,
        created_ms: int,
        expires_ms: int,
        known: Known | None = None,
    ) -> None:
        """Add a memory, or replace it when ``memory_id`` is already indexed; ``known``: what
        the caller holds of it already (``Known`` of one memory: its text's term counts, what
        selections read, its stored record)."""
        terms, facts, record = known.at(0) if known is not None else (None, None, None)
        if memory_id in self.rows:
            self.remove(memory_id)
        if self.pending is not None:
            self.pending[memory_id] = np.array(vector, dtype=np.float32)
        row = self._grow()
        self.ids[row] = memory_id
        self.hold_record(row, record)
        self.rows[memory_id] = row
        self.types[row] = memory_type
        if self.compact:
            self._store_compact(row, vector[None, :])
        else:
            self.matrix[row] = vector
        self.expires[row] = expires_ms
        self.created[row] = created_ms
        self.alive[row] = True
        facts = facts or RowFacts(valid_from=created_ms)
        self._set_facts(row, facts)
        counts = terms if terms is not None else term_counts(text)
        length = float(sum(counts.values()))  # the text's: fields have no length (b = 0)
        if facts.fields:  # each once (a field word counts once, search.keyword)
            counts = {**counts, **dict.fromkeys(facts.fields, 1)}
        self.row_tokens[row] = self._post(row, counts)
        self.doclen[row] = length
        self.total_len += length

    def add_many(
        self,
        memory_ids: Sequence[str],
        vectors: NDArray[np.float32],
        texts: Sequence[str],
        memory_types: Sequence[str],
        created_ms: Sequence[int],
        expires_ms: Sequence[int],
        known: Known | None = None,
    ) -> None:
        """Append memories not yet indexed, in bulk (a cold load): rows of ``vectors`` are
        unit vectors, one per id; vector work is done per block, not per row. ``known``: what
        the caller holds of them already (``Known``, one entry per memory; None entries and
        defaults set in bulk)."""
        terms, facts, records = known or Known()
        fresh = [i for i, memory_id in enumerate(memory_ids) if memory_id not in self.rows]
        if len(fresh) < len(memory_ids):  # already indexed: replace them one by one
            for i in set(range(len(memory_ids))) - set(fresh):
                self.upsert(
                    memory_ids[i],
                    vectors[i],
                    texts[i],
                    memory_types[i],
                    created_ms[i],
                    expires_ms[i],
                    Known.one(*known.at(i)) if known is not None else None,
                )
        if not fresh:
            return
        start = len(self.ids)
        count = len(fresh)
        self._reserve(start + count)
        picked = vectors if len(fresh) == len(memory_ids) else vectors[fresh]  # no copy if all
        if self.pending is not None:
            self.pending.update((memory_ids[i], np.array(vectors[i])) for i in fresh)
        end = start + count
        if self.compact:
            self._store_compact(start, picked)
        else:
            self.matrix[start:end] = picked
        self.expires[start:end] = [expires_ms[i] for i in fresh]
        self.created[start:end] = [created_ms[i] for i in fresh]
        self.alive[start:end] = True
        picked_ids = [memory_ids[i] for i in fresh]
        self.ids.extend(picked_ids)
        held = [records[i] for i in fresh] if records is not None else [None] * count
        self.records.extend(held)
        self._record_bytes += sum(len(r) for r in held if r is not None)
        self.rows.update(zip(picked_ids, range(start, end), strict=True))
        self.types.extend(memory_types[i] for i in fresh)
        self.row_filters.extend(() for _ in fresh)
        self.valid_from[start:end] = self.created[start:end]
        self.valid_until[start:end] = NEVER
        self.occurred[start:end] = UNKNOWN
        if facts is not None:
            for row, i in enumerate(fresh, start):
                row_facts = facts[i]
                if row_facts is not None:
                    self._set_facts(row, row_facts)
        all_counts = []
        field_lengths: dict[int, int] = {}  # row offset -> how many field tokens it has
        for at, i in enumerate(fresh):
            given = terms[i] if terms is not None else None
            counts = given if given is not None else term_counts(texts[i])
            row_facts = facts[i] if facts is not None else None
            if row_facts is not None and row_facts.fields:
                counts = {**counts, **dict.fromkeys(row_facts.fields, 1)}
                field_lengths[at] = len(row_facts.fields)
            all_counts.append(counts)
        lengths = self._post_many(start, all_counts)
        for at, field_length in field_lengths.items():  # fields have no length (b = 0)
            lengths[at] -= field_length
        self.doclen[start:end] = lengths
        self.total_len += float(lengths.sum())

    def _post_many(self, first_row: int, all_counts: list[dict[str, int]]) -> NDArray[np.float32]:
        """``_post`` for consecutive rows from ``first_row``, in bulk: the postings of each
        token grow by one slice of a sorted array instead of one entry at a time (a cold load
        of 10,000 memories spends a fraction of the time). Returns the rows' lengths."""
        tokens: list[str] = []
        frequencies: list[int] = []
        sizes: list[int] = []
        for counts in all_counts:
            tokens.extend(counts)
            frequencies.extend(counts.values())
            sizes.append(len(counts))
        vocabulary = self.vocabulary
        token_ids = [vocabulary.get(token, -1) for token in tokens]
        for at in [at for at, token_id in enumerate(token_ids) if token_id == -1]:
            token = tokens[at]  # new to the index (maybe twice in this batch)
            token_id = vocabulary.get(token, -1)
            if token_id == -1:
                token_id = vocabulary[token] = len(self.posting_rows)
                self.posting_rows.append(array("i"))
                self.posting_tfs.append(array("H"))
            token_ids[at] = token_id
        ids = np.array(token_ids, dtype=np.int32)
        tf = np.minimum(np.array(frequencies, dtype=np.int64), 65_535)
        rows = np.repeat(np.arange(first_row, first_row + len(sizes), dtype=np.int32), sizes)
        order = np.argsort(ids, kind="stable")  # rows stay in order within a token
        ids_sorted, rows_sorted, tf_sorted = ids[order], rows[order], tf[order].astype(np.uint16)
        cuts = (np.flatnonzero(np.diff(ids_sorted)) + 1).tolist()
        for begin, stop in zip([0, *cuts], [*cuts, ids_sorted.size], strict=True):
            token_id = int(ids_sorted[begin])
            self.posting_rows[token_id].frombytes(rows_sorted[begin:stop].tobytes())
            self.posting_tfs[token_id].frombytes(tf_sorted[begin:stop].tobytes())
        packed = ids.tobytes()
        offset = 0
        for size in sizes:
            row_ids = array("i")
            row_ids.frombytes(packed[offset * 4 : (offset + size) * 4])
            self.row_tokens.append(row_ids)
            offset += size
        self._posting_entries += len(token_ids)
        lengths: NDArray[np.float32] = np.bincount(
            rows - first_row, weights=tf, minlength=len(sizes)
        ).astype(np.float32)
        return lengths

    def _post(self, row: int, counts: dict[str, int]) -> array[int]:
        """Enter ``row`` in the postings of its tokens; the ids of those tokens."""
        vocabulary, rows, tfs = self.vocabulary, self.posting_rows, self.posting_tfs
        token_ids = []
        for token, tf in counts.items():
            token_id = vocabulary.get(token)
            if token_id is None:
                token_id = vocabulary[token] = len(rows)
                rows.append(array("i"))
                tfs.append(array("H"))
            rows[token_id].append(row)
            tfs[token_id].append(tf if tf < 65_535 else 65_535)
            token_ids.append(token_id)
        self._posting_entries += len(token_ids)
        return array("i", token_ids)

    def remove(self, memory_id: str) -> None:
        """Forget a memory; unknown ids are ignored."""
        if memory_id not in self.rows:
            return
        if self.tokens_unknown:
            self._know_row_tokens()
        row = self.rows.pop(memory_id)
        for token_id in self.row_tokens[row] or ():
            rows = self.posting_rows[token_id]
            at = rows.index(row)  # C scan of one token's rows; removals are rare
            del rows[at]
            del self.posting_tfs[token_id][at]
            self._posting_entries -= 1
        self.total_len -= float(self.doclen[row])
        self.row_tokens[row] = None
        self._set_terms(row, ())
        self.hold_record(row, None)
        self.ids[row] = None
        self.alive[row] = False
        if self.compact:
            self._writable()
            self.codes[row] = 0
            self.scales[row] = 0.0
        else:
            self.matrix[row] = 0.0
        self.free.append(row)

    def hold_record(self, row: int, record: bytes | None) -> None:
        """Hold ``record`` as the stored record of ``row`` (None: none held)."""
        before = self.records[row]
        self._record_bytes += (len(record) if record else 0) - (len(before) if before else 0)
        self.records[row] = record

    def hold_missing(self, records: Mapping[str, bytes]) -> None:
        """Hold each of ``records`` (stored JSON by memory id, as read now) for its indexed row
        that holds none; ids not indexed are ignored."""
        for memory_id, record in records.items():
            row = self.rows.get(memory_id)
            if row is not None and self.records[row] is None:
                self.hold_record(row, record)

    def record_of(self, memory_id: str) -> bytes | None:
        """The stored record held for ``memory_id``, or None (not indexed, or not held)."""
        row = self.rows.get(memory_id)
        return self.records[row] if row is not None else None

    def _know_row_tokens(self) -> None:
        """Rebuild every row's token ids from the postings (one sort of all entries)."""
        sizes = [len(rows) for rows in self.posting_rows]
        entries = np.frombuffer(b"".join(r.tobytes() for r in self.posting_rows), dtype=np.int32)
        token_ids = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        order = np.argsort(entries, kind="stable")
        by_row, tokens = entries[order], token_ids[order]
        cuts = np.searchsorted(by_row, np.arange(len(self.ids) + 1, dtype=np.int32))
        packed = tokens.tobytes()
        for row in range(len(self.ids)):
            begin, end = int(cuts[row]), int(cuts[row + 1])
            if self.ids[row] is not None:
                row_ids = array("i")
                row_ids.frombytes(packed[begin * 4 : end * 4])
                self.row_tokens[row] = row_ids
        self.tokens_unknown = False

    def recount(self) -> None:
        """Count the posting and filter entries again (after the columns were set in bulk)."""
        postings = self.posting_rows
        self._posting_entries = (
            postings.entries()
            if isinstance(postings, KeptPostings)
            else sum(len(rows) for rows in postings)
        )
        self._filter_entries = sum(map(len, self.row_filters))

    def _set_facts(self, row: int, facts: RowFacts) -> None:
        self.valid_from[row] = facts.valid_from
        self.valid_until[row] = facts.valid_until
        self.occurred[row] = facts.occurred
        self._set_terms(row, facts.terms)

    def _set_terms(self, row: int, terms: tuple[str, ...]) -> None:
        for term in self.row_filters[row]:
            rows = self.filter_rows[term]
            rows.discard(row)
            if not rows:
                del self.filter_rows[term]
        self._filter_entries += len(terms) - len(self.row_filters[row])
        self.row_filters[row] = terms
        for term in terms:
            self.filter_rows.setdefault(term, set()).add(row)

    def close(self, memory_id: str, valid_until_ms: int) -> None:
        """Mark an indexed memory as replaced at ``valid_until_ms`` (no longer current); unknown
        ids are ignored."""
        row = self.rows.get(memory_id)
        if row is not None:
            self.valid_until[row] = valid_until_ms
            self.hold_record(row, None)  # it says otherwise now: read again when shown

    # --- queries -----------------------------------------------------------------------------

    def _go_compact(self) -> None:
        """Switch to the compact form, converting the rows held so far."""
        rows = self.matrix.shape[0]
        self.codes = np.zeros((rows, self.dimensions), dtype=np.int8)
        self.scales = np.zeros(rows, dtype=np.float32)
        self.bits = np.zeros((rows, bit_bytes(self.dimensions)), dtype=np.uint8)
        for start in range(0, rows, BLOCK):
            self._store_compact(start, self.matrix[start : start + BLOCK])
        self.matrix = np.zeros((0, self.dimensions), dtype=np.float32)
        self.compact = True

    def _store_compact(self, start: int, block: NDArray[np.float32]) -> None:
        """Rows ``start..`` in the compact form: int8 codes, scales and packed sign bits of
        the unit vectors in ``block`` (one per row)."""
        end = start + block.shape[0]
        self._writable()
        self.codes[start:end], self.scales[start:end] = quantize_rows(block)
        self.bits[start:end] = np.packbits(block > 0, axis=1)

    @property
    def fits_exact(self) -> bool:
        """Whether this index, compact, would hold its float32 vectors within its threshold
        (an index read from its kept form is compact whatever its size: ``go_exact``)."""
        limit = self.compact_above_bytes or COMPACT_ABOVE_BYTES
        return self.compact and self.expires.shape[0] * self.dimensions * 4 <= limit

    def go_exact(self, vectors: Mapping[str, bytes]) -> bool:
        """Switch a compact index to exact float32 vectors: each live row's from ``pending``
        (entered since the read began) or else from ``vectors`` (read from the stored
        memories, by id); ``pending`` ends. False, and nothing changed, when a live row has
        neither (or one of another length). The caller holds ``lock``."""
        pending, self.pending = self.pending or {}, None
        if not self.compact:
            return True
        size = len(self.ids)
        matrix = np.zeros((self.expires.shape[0], self.dimensions), dtype=np.float32)
        for row in np.flatnonzero(self.alive[:size]).tolist():
            memory_id = cast(str, self.ids[row])
            vector = pending.get(memory_id)
            if vector is None:
                blob = vectors.get(memory_id)
                if blob is None or len(blob) != self.dimensions * 4:
                    return False
                vector = np.frombuffer(blob, dtype=np.float32)
            matrix[row] = vector
        self.matrix = matrix
        self.compact = False
        self.codes = np.zeros((0, self.dimensions), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.bits = np.zeros((0, self.bits.shape[1]), dtype=np.uint8)
        self.bits_unknown = False
        self.codes_source = None
        return True

    def _know_bits(self) -> None:
        """The sign bits of every row, from its int8 codes (an index read from a kept form of
        format 3, which has no bits)."""
        self.ensure_codes()
        if not self.bits.flags.writeable:
            self.bits = self.bits.copy()
        size = len(self.ids)
        for start in range(0, size, BLOCK):
            end = min(size, start + BLOCK)
            self.bits[start:end] = np.packbits(self.codes[start:end] > 0, axis=1)
        self.bits_unknown = False

    def _writable(self) -> None:
        """Copies of the codes, scales and sign bits when they are still views of a kept
        form's bytes (read-only: a loaded index shares them until its first change); the codes
        fetched first when the index was read without them."""
        self.ensure_codes()
        if not self.bits.flags.writeable:
            self.bits = self.bits.copy()
        if not self.codes.flags.writeable:
            self.codes = self.codes.copy()
        if not self.scales.flags.writeable:
            self.scales = self.scales.copy()

    def semantic(
        self,
        query: NDArray[np.float32],
        limit: int,
        now_ms: int,
        types: Selection | Sequence[str] | None,
    ) -> list[Hit]:
        """The ``limit`` best memories by cosine with the unit vector ``query``, best first,
        among those ``types`` selects (a ``Selection``, or the current memories of a sequence of
        types; None: all current ones).

        Exact unless the index is compact; then (see ``exact``) these are the ``candidates()``
        best by approximate score, for the caller to rescore with the stored float32 vectors.
        """
        size = len(self.ids)
        if size == 0:
            return []
        admitted = eligible(self, now_ms, types)
        if not self.compact:
            scores = parallel(dot, self.matrix[:size], query, min_rows=exact_rows(query))
            return top(scores, admitted, limit, self.ids)
        rows = np.flatnonzero(admitted)
        fetching = self.codes_source is not None
        if rows.size > PREFILTER_ABOVE or (fetching and rows.size > FETCHED_CANDIDATES):
            if self.bits_unknown:
                self._know_bits()
            # Every row's distance (a slice, no gather: cheaper than picking the eligible rows
            # first), the ineligible ones pushed to the end.
            distance = parallel(hamming, self.bits[:size], np.packbits(query > 0))
            distance[~admitted] = np.iinfo(np.uint16).max
            if fetching:
                keep = min(rows.size, max(limit * 20, FETCHED_CANDIDATES))
            else:
                wide = rows.size // PREFILTER_KEEP_DIVISOR
                keep = min(rows.size, max(limit * 50, 2000, wide))
            rows = np.argpartition(distance, keep - 1)[:keep]
        if fetching:  # only these rows' codes, read now (the others are not here yet)
            codes = self.codes_for(rows)
            approx = parallel_int8_scores(codes, self.scales[rows], np.arange(rows.size), query)
        else:
            approx = parallel_int8_scores(self.codes, self.scales, rows, query)
        mask = np.zeros(size, dtype=np.bool_)
        mask[rows] = True
        scores = np.zeros(size, dtype=np.float32)
        scores[rows] = approx
        return top(scores, mask, self._rescored(approx, self.scales[rows], limit), self.ids)

    def _rescored(
        self, approx: NDArray[np.float32], scales: NDArray[np.float32], limit: int
    ) -> int:
        """How many of the approximate best a compact search returns for exact rescoring:
        ``candidates(limit)``, and every row whose approximate score is within ``ERROR_WINDOW``
        of the last of those (at most ``RESCORED_AT_MOST``), so that memories scoring closer
        together than int8 codes can tell (near duplicates) are all rescored and the exact
        best is never cut. Each code is off by at most half its row's step (``scale / 2``), so
        a unit query's approximate score is off by an error of standard deviation at most
        ``scale / sqrt(12)``; two scores differ by twice that at most, six deviations each."""
        wanted = self.candidates(limit)
        if approx.size <= wanted:
            return wanted
        last = float(np.partition(approx, approx.size - wanted)[approx.size - wanted])
        window = ERROR_WINDOW * float(scales.max()) / math.sqrt(12.0)
        close = int(np.count_nonzero(approx >= last - window))
        return max(wanted, min(close, RESCORED_AT_MOST))

    def selected(self, now_ms: int, where: Selection) -> list[tuple[int, str]]:
        """``(created ms, id)`` of every memory ``where`` selects (as ``semantic``), in row
        order: what a listing orders and cuts into pages."""
        rows = np.flatnonzero(eligible(self, now_ms, where))
        created = self.created[rows].tolist()
        return [(c, cast(str, self.ids[r])) for c, r in zip(created, rows.tolist(), strict=True)]

    def count(self, now_ms: int, where: Selection | Sequence[str] | None = None) -> int:
        """How many memories ``where`` selects (as ``semantic``)."""
        return int(np.count_nonzero(eligible(self, now_ms, where)))

    @property
    def exact(self) -> bool:
        """Whether ``semantic`` scores are exact cosines (False when the index is compact)."""
        return not self.compact

    @staticmethod
    def candidates(limit: int) -> int:
        """How many approximate candidates a compact index returns for ``limit`` results."""
        return max(limit * 4, 40)

    def keyword(
        self, query: Query | str, limit: int, now_ms: int, types: Selection | Sequence[str] | None
    ) -> list[Hit]:
        """The ``limit`` best memories by keyword for ``query`` (a search's ``Query``, or a
        text), best first, among those ``types`` selects (as ``semantic``):
        ``search.keyword.keyword_hits``."""
        return keyword_hits(self, tokens_of(query), limit, now_ms, types)

    def best_match(self, query: NDArray[np.float32], now_ms: int) -> list[Hit]:
        """Candidates for the most similar current memory (for deduplication): the one best
        when the index is exact, else ``candidates(1)`` to rescore."""
        return self.semantic(query, 1, now_ms, CURRENT)


_T = TypeVar("_T", bound=np.generic)


def _resize(array: NDArray[_T], shape: tuple[int, ...]) -> NDArray[_T]:
    grown = np.zeros(shape, dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown
