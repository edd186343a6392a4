"""The data of one actor's search index: ``IndexColumns``, the columns, postings and records
that the index's methods (``search.index.ActorIndex``) keep up and that the readers beside them
read: the selection masks (``search.masks``), keyword ranking (``search.keyword``) and the
measures a score is made of (``search.measures``). A module of its own so that those readers
need not import the index, which builds on them."""

from __future__ import annotations

import threading
from array import array
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.quantize import bit_bytes
from agent_memory.search.selection import RowFacts


class CodeSource(Protocol):
    """Where the int8 codes of an index read without them come from (``search.snapshot.
    load_head``; ``memories.indexes.KeptCodes`` reads them from the kept form)."""

    def rows(self, rows: NDArray[np.intp]) -> NDArray[np.int8]:
        """The codes of ``rows`` (one row of ``dimensions`` codes each, in that order)."""
        ...

    def all(self) -> NDArray[np.int8]:
        """The codes of every row the index was read with."""
        ...


@dataclass
class IndexColumns:
    """Vectors and postings of one actor's memories, at generation ``gen`` of the actor's log.

    Rows are reused after removals; ``alive`` marks rows in use. Thread-safety: the cache
    serialises updates and searches of one index with ``lock``.
    """

    dimensions: int
    gen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    ids: list[str | None] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    types: list[str] = field(default_factory=list)
    matrix: NDArray[np.float32] = field(init=False)
    expires: NDArray[np.int64] = field(init=False)
    created: NDArray[np.int64] = field(init=False)
    alive: NDArray[np.bool_] = field(init=False)
    doclen: NDArray[np.float32] = field(init=False)
    # For selections (``search.selection.Selection``): when each row became current and stopped
    # being so (``NEVER`` while current), when its event happened (``UNKNOWN``), and for topics and
    # metadata pairs, the rows holding each filter term (rows without any cost nothing).
    valid_from: NDArray[np.int64] = field(init=False)
    valid_until: NDArray[np.int64] = field(init=False)
    occurred: NDArray[np.int64] = field(init=False)
    filter_rows: dict[str, set[int]] = field(default_factory=dict, repr=False)
    row_filters: list[tuple[str, ...]] = field(default_factory=list, repr=False)
    # The keyword side, kept compact (a 100,000-memory actor must fit the cache with its
    # vectors): token -> id; per token id, its rows (int32) and term frequencies (uint16) in
    # two growable C arrays that a query reads in place (``np.frombuffer``, no copy); per row,
    # the ids of its tokens, to take the row out of those postings when it is removed.
    vocabulary: dict[str, int] = field(default_factory=dict)
    posting_rows: MutableSequence[array[int]] = field(default_factory=list, repr=False)
    """Each word's rows (``search.kept_postings.KeptPostings`` when read from a kept form)."""
    posting_tfs: MutableSequence[array[int]] = field(default_factory=list, repr=False)
    """Each word's term frequency in each of those rows."""
    row_tokens: list[array[int] | None] = field(default_factory=list, repr=False)
    total_len: float = 0.0
    # Per row, the memory's stored record (its JSON, ``memories.records.record_json``) as of
    # ``gen``, so a read renders what it ranked without fetching it; None where it is not held
    # (rows read from a kept form, until a read fetches them).
    records: list[bytes | None] = field(default_factory=list, repr=False)
    free: list[int] = field(default_factory=list)
    compact_above_bytes: int | None = None  # None: search.index.COMPACT_ABOVE_BYTES
    compact: bool = False
    codes: NDArray[np.int8] = field(init=False)
    scales: NDArray[np.float32] = field(init=False)
    bits: NDArray[np.uint8] = field(init=False)
    # The generation of the actor's kept index in the database (``search.snapshot``) as this
    # container last knew it; -1 when none is known.
    kept: int = -1
    # The generation at which this index was too large to keep (-1: never): not tried again
    # until it has changed as much as a kept index may fall behind.
    too_large_at: int = -1
    # True when the rows' token lists (``row_tokens``) were not loaded with the postings (an
    # index read from its kept form): they are rebuilt from the postings at the first removal.
    tokens_unknown: bool = False
    # True when the sign bits of the compact rows were not computed (an index read from its
    # kept form): they are, at the first search that pre-filters by them.
    bits_unknown: bool = False
    # Read from its kept form without its int8 codes (``search.snapshot.load_head``): where
    # they come from, some rows' for a search, all before the first change
    # (``ActorIndex.ensure_codes``); None once they are here, and for any other index.
    codes_source: CodeSource | None = field(default=None, repr=False)
    # While the exact form of a compact index is being read (``go_exact``): the vectors of the
    # rows entered since, by id.
    pending: dict[str, NDArray[np.float32]] | None = field(default=None, repr=False)
    # Read compact from its kept form, and its float32 vectors fit: they are read at the next
    # read of the actor (``memories.indexes.ActorIndexes``).
    exact_wanted: bool = False
    _posting_entries: int = field(default=0, repr=False)
    _filter_entries: int = field(default=0, repr=False)
    _record_bytes: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.codes = np.zeros((0, self.dimensions), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.bits = np.zeros((0, bit_bytes(self.dimensions)), dtype=np.uint8)
        self.matrix = np.zeros((0, self.dimensions), dtype=np.float32)
        self.expires = np.zeros(0, dtype=np.int64)
        self.created = np.zeros(0, dtype=np.int64)
        self.alive = np.zeros(0, dtype=np.bool_)
        self.doclen = np.zeros(0, dtype=np.float32)
        self.valid_from = np.zeros(0, dtype=np.int64)
        self.valid_until = np.zeros(0, dtype=np.int64)
        self.occurred = np.zeros(0, dtype=np.int64)

    def ensure_codes(self) -> None:
        """Fetch every row's int8 codes now when the index was read without them
        (``codes_source``), before anything that changes or dumps them. The caller holds
        ``lock``. Errors: those of the source (``DatabaseUnavailable``)."""
        source = self.codes_source
        if source is not None:
            self.codes = source.all().reshape(-1, self.dimensions)
            self.codes_source = None

    def codes_for(self, rows: NDArray[np.intp]) -> NDArray[np.int8]:
        """The int8 codes of ``rows`` of a compact index: from the codes held, or, while they
        are not (``codes_source``), fetched for just these rows."""
        if self.codes_source is not None:
            return self.codes_source.rows(rows).reshape(rows.size, self.dimensions)
        return self.codes[rows]


class Known(NamedTuple):
    """What a caller may already hold of the memories it enters in an index, one entry per
    memory (a None sequence or entry: not held): their texts' ``term_counts`` (``terms``;
    counted from the texts otherwise), what selections read (``facts``; by default current
    since created, no event time, no topics or metadata) and their stored records
    (``records``, which the index holds for reads)."""

    terms: Sequence[dict[str, int] | None] | None = None
    facts: Sequence[RowFacts | None] | None = None
    records: Sequence[bytes | None] | None = None

    @classmethod
    def one(
        cls,
        terms: dict[str, int] | None = None,
        facts: RowFacts | None = None,
        record: bytes | None = None,
    ) -> Known:
        """What is held of one memory."""
        return cls([terms], [facts], [record])

    def at(self, i: int) -> tuple[dict[str, int] | None, RowFacts | None, bytes | None]:
        """The ``i``-th memory's terms, facts and record (None where not held)."""
        return (
            self.terms[i] if self.terms is not None else None,
            self.facts[i] if self.facts is not None else None,
            self.records[i] if self.records is not None else None,
        )
