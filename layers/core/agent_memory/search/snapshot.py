"""An actor's index in a form kept in the database: fixed-layout arrays that load without parsing.

A new container would otherwise build an actor's ``ActorIndex`` from every stored record (JSON
decoding, tokenizing, vectors): hundreds of milliseconds at 10,000 memories, seconds at 100,000.
``dump`` writes the index as a short JSON header followed by the columns as raw little-endian
arrays, and ``load`` reads them back with ``numpy.frombuffer`` (no per-memory work beyond
splitting the ids and the vocabulary), into an index in the compact form (``search.index``):

- vectors as int8 codes with a scale per row (``search.quantize.quantize_rows``): a quarter of
  float32, so the whole kept form adds about 500 bytes to a memory of 384 dimensions, which
  takes about 2,100 in Redis without it (``make bench-scale``). Semantic candidates of a
  compact index are rescored with the stored float32 vectors (``ActorIndexes.rescore``), so
  results stay exact cosines; the sign bits of the pre-filter are computed when first needed;
- the ids: the 20 hex digits of each as 10 bytes (ids of another form: a JSON list);
- created and expiry times per row (int64); ``valid_from``, ``valid_until`` and ``occurred`` only
  for the rows where they differ from their defaults (most rows: none);
- the BM25 postings by token (rows and term frequencies, in the narrowest integer types that
  hold them; field tokens too, with the list of which words are field tokens), from which the
  rows' lengths are summed (text tokens only);
  the rows' own token lists are rebuilt only when a row is first removed
  (``ActorIndex.tokens_unknown``);
- types and filter terms (topics, metadata pairs) as small tables; the vocabulary, ids of
  another form and the filter terms as JSON lists of strings (ASCII, escapes included), so any
  character a text may hold, NUL among them, reads back.

Only live rows are written, renumbered in order. A kept form carries its format, the
tokenizer's version, the dimensions and the generation of the actor's change log it reflects;
``load`` returns None for one made under another format, tokenizer or dimension setting, and the
caller builds the index from the records instead.

The bytes may be split into parts of at most ``PART_BYTES`` (a Redis string holds at most
512 MB); ``load`` takes the parts in order.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.columns import CodeSource
from agent_memory.search.index import ActorIndex
from agent_memory.search.kept_postings import KeptPostings
from agent_memory.search.quantize import BLOCK, bit_bytes, quantize_rows
from agent_memory.search.selection import NEVER, UNKNOWN
from agent_memory.search.tokenizer import FIELD_MARK, TOKENIZER_VERSION

FORMAT = 4
"""The layout's version. 3: the postings hold the field tokens of topics and metadata values
(``search.tokenizer.field_tokens``); 4: also the rows' packed sign bits, and the int8 codes come
last, so that a reader can take everything before them (``head_bytes``, ``load_head``) and the
codes later, or only some rows' (``code_span``). Forms 3 and 4 are read; any other is not."""
READ_FORMATS = (3, 4)
MAGIC = b"KVX1"
PART_BYTES = 256 * 1024 * 1024
"""Bytes per part of a kept form (each part is one Redis string, at most 512 MB; a section that
spans two parts is copied when loaded, so parts are large: 100,000 memories of 1,536 dimensions
take one)."""
MAX_PARTS = 3
"""Parts of one kept form at most (768 MiB: about 490,000 memories of 1,536 dimensions; all parts
go to Redis in one script call, which must stay under its 1 GiB client query buffer)."""
_ALIGN = 8
_MEMORY_ID = re.compile(r"mem_[0-9a-f]{20}")
"""``memories.models.MEMORY_ID_PATTERN``: ids of this form are kept as their 10 bytes."""


def dump(index: ActorIndex, max_parts: int = MAX_PARTS) -> list[bytes]:
    """The kept form of ``index`` (its live rows) as parts of at most ``PART_BYTES``, or an
    empty list when it would take more than ``max_parts`` parts. The caller holds
    ``index.lock``."""
    size = len(index.ids)
    live = np.flatnonzero(index.alive[:size])
    renumber = np.full(size, -1, dtype=np.int64)
    renumber[live] = np.arange(live.size)
    ids = [index.ids[row] for row in live.tolist()]
    rows = live.size
    sections: list[tuple[str, str, bytes | memoryview]] = []

    def add(name: str, values: NDArray[Any] | bytes) -> None:
        if isinstance(values, bytes):
            sections.append((name, "|u1", values))
        else:  # the array's own bytes, copied once, into the joined whole
            data = np.ascontiguousarray(values).reshape(-1).view(np.uint8).data
            sections.append((name, values.dtype.str, data))

    texts = [str(i) for i in ids]
    if all(_MEMORY_ID.fullmatch(i) for i in texts):  # 10 bytes each instead of 25
        add("id_digits", bytes.fromhex("".join(i[4:] for i in texts)))
    else:
        add("ids", json.dumps(texts).encode())
    type_names = sorted({index.types[row] for row in live.tolist()})
    type_of = {name: n for n, name in enumerate(type_names)}
    add(
        "types",
        np.array(
            [type_of[index.types[row]] for row in live.tolist()],
            dtype=np.uint16 if len(type_names) > 255 else np.uint8,
        ),
    )
    created = index.created[live]
    add("created", created)
    add("expires", index.expires[live])
    for name, column, default in (
        ("valid_from", index.valid_from[live], created),
        ("valid_until", index.valid_until[live], NEVER),
        ("occurred", index.occurred[live], UNKNOWN),
    ):
        odd = np.flatnonzero(column != default)
        add(name + "_rows", odd.astype(np.int32))
        add(name, column[odd])
    codes, scales = _codes(index, live)
    add("scales", scales)
    add("bits", _bits(index, live, codes))
    _add_postings(index, renumber, rows, add)
    terms = sorted({term for row in live.tolist() for term in index.row_filters[row]})
    term_of = {term: n for n, term in enumerate(terms)}
    pairs = [
        (new, term_of[term])
        for new, row in enumerate(live.tolist())
        for term in index.row_filters[row]
    ]
    add("filter_terms", json.dumps(terms).encode())
    add("filter_rows", np.array([p[0] for p in pairs], dtype=np.int32))
    add("filter_term_ids", np.array([p[1] for p in pairs], dtype=np.int32))
    add("codes", codes)  # last: everything before it is the head (``head_bytes``)
    header: dict[str, Any] = {
        "format": FORMAT,
        "tokenizer": TOKENIZER_VERSION,
        "dimensions": index.dimensions,
        "gen": index.gen,
        "rows": rows,
        "types": type_names,
        "sections": [],
    }
    offset = 0
    for name, dtype, data in sections:
        header["sections"].append([name, dtype, offset, len(data)])
        offset += len(data) + (-len(data)) % _ALIGN
    parts = 1
    while True:  # the header names how many parts there are, which its own length may change
        header["parts"] = parts
        head = json.dumps(header).encode()
        start = 8 + len(head) + (-(8 + len(head))) % _ALIGN
        needed = -(-(start + offset) // PART_BYTES)
        if needed <= parts:
            break
        parts = needed
    if parts > max_parts:
        return []
    pieces: list[bytes | memoryview] = [MAGIC, struct.pack("<I", len(head)), head]
    pieces.append(bytes(start - 8 - len(head)))
    for _, _, data in sections:
        pieces += [data, bytes((-len(data)) % _ALIGN)]
    blob = b"".join(pieces)
    if len(blob) <= PART_BYTES:
        return [blob]
    return [blob[at : at + PART_BYTES] for at in range(0, len(blob), PART_BYTES)]


def _codes(
    index: ActorIndex, live: NDArray[np.intp]
) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """The int8 codes and scales of the live rows (quantized here when the index holds
    float32 vectors, a block at a time)."""
    if index.compact:
        index.ensure_codes()
        return index.codes[live], index.scales[live]
    codes = np.empty((live.size, index.dimensions), dtype=np.int8)
    scales = np.empty(live.size, dtype=np.float32)
    for start in range(0, live.size, BLOCK):
        chunk = live[start : start + BLOCK]
        codes[start : start + chunk.size], scales[start : start + chunk.size] = quantize_rows(
            index.matrix[chunk]
        )
    return codes, scales


def _bits(index: ActorIndex, live: NDArray[np.intp], codes: NDArray[np.int8]) -> NDArray[np.uint8]:
    """The packed sign bits of the live rows: the index's own when it knows them, else those
    of the int8 codes (``ActorIndex._know_bits`` computes them so too)."""
    if index.compact and not index.bits_unknown and index.codes_source is None:
        return index.bits[live]
    bits = np.empty((live.size, (index.dimensions + 7) // 8), dtype=np.uint8)
    for start in range(0, live.size, BLOCK):
        bits[start : start + BLOCK] = np.packbits(codes[start : start + BLOCK] > 0, axis=1)
    return bits


def _add_postings(index: ActorIndex, renumber: NDArray[np.int64], rows: int, add: Any) -> None:
    """The postings of the tokens still in use, rows renumbered, as flat arrays with offsets."""
    used = [t for t, posting in enumerate(index.posting_rows) if len(posting)]
    tokens = sorted(index.vocabulary, key=index.vocabulary.__getitem__)
    words = [tokens[t] for t in used]
    sizes = np.array([len(index.posting_rows[t]) for t in used], dtype=np.int64)
    old_rows = np.frombuffer(
        b"".join(index.posting_rows[t].tobytes() for t in used), dtype=np.int32
    )
    tfs = np.frombuffer(b"".join(index.posting_tfs[t].tobytes() for t in used), dtype=np.uint16)
    new_rows = renumber[old_rows] if old_rows.size else np.zeros(0, dtype=np.int64)
    add("vocabulary", json.dumps(words).encode())  # ASCII: any token, NUL or not, reads back
    # Which of them are field tokens (none in most indexes): a load need not look at every word.
    add(
        "field_words",
        np.array([n for n, w in enumerate(words) if w.startswith(FIELD_MARK)], dtype=np.int32),
    )
    add("posting_sizes", sizes.astype(np.uint16 if rows < 65_536 else np.uint32))
    add("posting_rows", new_rows.astype(np.uint16 if rows <= 65_536 else np.int32))
    add("posting_tfs", tfs.astype(np.uint8) if tfs.size and int(tfs.max()) < 256 else tfs)


class _Blob:
    """The parts of a kept form read as one byte string, without joining them unless a section
    spans two parts."""

    def __init__(self, parts: Sequence[bytes]) -> None:
        self._parts = [memoryview(p) for p in parts]
        self._starts = []
        at = 0
        for part in self._parts:
            self._starts.append(at)
            at += len(part)
        self.size = at

    def take(self, offset: int, length: int) -> memoryview | bytes:
        """``length`` bytes from ``offset`` of the whole: a view when they lie in one part, else
        a read-only copy of just them; ``ValueError`` past the end."""
        if length == 0:
            return b""
        for part, start in zip(self._parts, self._starts, strict=True):
            if start <= offset < start + len(part):
                if offset + length <= start + len(part):
                    return part[offset - start : offset - start + length]
                break
        if offset + length > self.size or offset < 0:
            raise ValueError("section out of range")
        joined = bytearray(length)  # only this section's bytes, copied once
        at = 0
        for part, start in zip(self._parts, self._starts, strict=True):
            begin, end = max(offset, start), min(offset + length, start + len(part))
            if begin < end:
                joined[at : at + end - begin] = part[begin - start : end - start]
                at += end - begin
        return memoryview(joined).toreadonly()


def header(parts: Sequence[bytes]) -> dict[str, Any] | None:
    """The header of a kept form (its format, tokenizer, dimensions, generation, rows and
    sections), or None when ``parts`` do not start with one."""
    if not parts or len(parts[0]) < 8 or parts[0][:4] != MAGIC:
        return None
    (length,) = struct.unpack("<I", parts[0][4:8])
    try:
        found = json.loads(bytes(parts[0][8 : 8 + length]))
    except (ValueError, RecursionError):
        return None
    if not isinstance(found, dict):
        return None
    found["_data"] = 8 + length + (-(8 + length)) % _ALIGN
    return found


def load(parts: Sequence[bytes], dimensions: int) -> ActorIndex | None:
    """The index kept in ``parts`` (``dump``'s output, in order), compact, with ``gen`` and
    ``kept`` set to the generation it reflects; None when the
    parts hold no kept form of this ``FORMAT``, tokenizer and ``dimensions``, or are cut short
    or inconsistent."""
    head = header(parts)
    if (
        head is None
        or head.get("format") not in READ_FORMATS
        or head.get("tokenizer") != TOKENIZER_VERSION
        or head.get("dimensions") != dimensions
    ):
        return None
    try:
        return _build(_Blob(parts), head, dimensions, codes=True)
    except (
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        AttributeError,
        OverflowError,
        RecursionError,
    ):
        return None  # a damaged kept form: the caller builds from the records


def head_bytes(head: dict[str, Any]) -> int | None:
    """How many bytes of a kept form come before its int8 codes (``header``'s ``head``): what
    ``load_head`` reads; None for a form whose codes do not come last (form 3)."""
    if head.get("format") != 4:
        return None
    spans = {name: (offset, length) for name, _, offset, length in head.get("sections", [])}
    if "codes" not in spans or "bits" not in spans:
        return None
    offset, _ = spans["codes"]
    if any(o > offset for o, _ in spans.values()):
        return None
    return int(head["_data"]) + int(offset)


def code_span(head: dict[str, Any]) -> tuple[int, int]:
    """``(offset, row bytes)`` of the int8 codes in the whole of a kept form (its parts joined):
    row ``r``'s codes are the ``row bytes`` bytes at ``offset + r * row bytes``."""
    spans = {name: (offset, length) for name, _, offset, length in head["sections"]}
    return int(head["_data"]) + int(spans["codes"][0]), int(head["dimensions"])


def load_head(head_part: bytes, dimensions: int, source: CodeSource) -> ActorIndex | None:
    """The index kept in a form 4 kept form, from its first ``head_bytes`` bytes only: every
    column but the int8 codes, which ``source`` fetches when they are needed
    (``ActorIndex.codes_source``: some rows' for a search, all of them before a change); None
    as ``load`` for anything it cannot read."""
    head = header([head_part])
    if (
        head is None
        or head.get("format") != 4
        or head.get("tokenizer") != TOKENIZER_VERSION
        or head.get("dimensions") != dimensions
        or head_bytes(head) != len(head_part)
    ):
        return None
    try:
        index = _build(_Blob([head_part]), head, dimensions, codes=False)
    except (
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        AttributeError,
        OverflowError,
        RecursionError,
    ):
        return None
    if index is not None:
        index.codes_source = source
    return index


def _build(blob: _Blob, head: dict[str, Any], dimensions: int, *, codes: bool) -> ActorIndex | None:
    base = head["_data"]
    spans = {
        name: (dtype, base + offset, length) for name, dtype, offset, length in head["sections"]
    }

    def raw(name: str) -> memoryview | bytes:
        _, offset, length = spans[name]
        return blob.take(offset, length)

    def column(name: str) -> NDArray[Any]:
        dtype = np.dtype(spans[name][0])
        return np.frombuffer(raw(name), dtype=dtype)

    rows = int(head["rows"])
    ids = _memory_ids(bytes(raw("id_digits"))) if "id_digits" in spans else _strings(raw("ids"))
    if len(ids) != rows:
        return None
    index = ActorIndex(dimensions=dimensions, gen=int(head["gen"]), compact=True)
    index.kept = index.gen
    # Exactly the rows kept: the first row added grows every column (copies), and until then
    # the codes and scales are read-only views of the bytes read (``ActorIndex._writable``).
    index.reserve(rows)
    if codes:
        index.codes = column("codes").reshape(rows, dimensions)
    else:  # fetched later, by ``ActorIndex.codes_source``
        index.codes = np.zeros((0, dimensions), dtype=np.int8)
    index.scales = column("scales")
    if len(index.scales) != rows:
        return None
    if "bits" in spans:  # form 4: the sign bits are kept too
        index.bits = column("bits").reshape(rows, bit_bytes(dimensions))
        index.bits_unknown = False
    else:
        index.bits_unknown = True
    index.created[:rows] = column("created")
    index.expires[:rows] = column("expires")
    index.alive[:rows] = True
    index.valid_from[:rows] = index.created[:rows]
    index.valid_until[:rows] = NEVER
    index.occurred[:rows] = UNKNOWN
    for name, target in (
        ("valid_from", index.valid_from),
        ("valid_until", index.valid_until),
        ("occurred", index.occurred),
    ):
        target[column(name + "_rows")] = column(name)
    index.ids = list(ids)
    index.records = [None] * rows
    index.rows = dict(zip(ids, range(rows), strict=True))
    type_names = head["types"]
    index.types = list(map(type_names.__getitem__, column("types").tolist()))
    _load_postings(index, column, raw, rows)
    index.row_tokens = [None] * rows
    index.tokens_unknown = True
    index.row_filters = [()] * rows
    terms = _strings(raw("filter_terms"))
    held: dict[int, list[str]] = {}
    for row, term in zip(
        column("filter_rows").tolist(), column("filter_term_ids").tolist(), strict=True
    ):
        held.setdefault(row, []).append(terms[term])
        index.filter_rows.setdefault(terms[term], set()).add(row)
    for row, row_terms in held.items():
        index.row_filters[row] = tuple(row_terms)
    index.recount()
    return index


def _strings(data: memoryview | bytes) -> list[str]:
    """A JSON list of strings (``ValueError`` for anything else)."""
    found = json.loads(bytes(data))
    if not isinstance(found, list) or not set(map(type, found)) <= {str}:
        raise ValueError("not a list of strings")
    return found


def _memory_ids(digits: bytes) -> list[str]:
    """The memory ids whose digits ``digits`` holds, 10 bytes an id (``"mem_"`` and 20 hex
    digits): cut and prefixed by ``bytes.hex``, ``str.replace`` and ``str.split``, without a
    Python step per id (10,000 ids: 3.7 ms one by one, 1.4 ms so, on this project's machine)."""
    if not digits:
        return []
    if len(digits) % 10:
        raise ValueError("memory id digits cut short")
    return ("mem_" + digits.hex("\x00", 10).replace("\x00", "\x00mem_")).split("\x00")


def _load_postings(index: ActorIndex, column: Any, raw: Any, rows: int) -> None:
    """The vocabulary and postings, and each row's length (the sum of its text's term
    frequencies)."""
    words = _strings(raw("vocabulary"))
    sizes = column("posting_sizes").astype(np.int64)
    if len(words) != sizes.size:
        raise ValueError("vocabulary and postings disagree")
    posting_rows = column("posting_rows").astype(np.int32)
    tfs = column("posting_tfs").astype(np.uint16)
    if posting_rows.size != int(sizes.sum()) or tfs.size != posting_rows.size:
        raise ValueError("postings cut short")
    if posting_rows.size and (int(posting_rows.max()) >= rows or int(posting_rows.min()) < 0):
        raise ValueError("posting of a row not kept")
    index.vocabulary = dict(zip(words, range(len(words)), strict=True))
    # Each word's two arrays are made at its first use (search.kept_postings: why).
    starts = [0, *np.cumsum(sizes).tolist()]
    index.posting_rows = KeptPostings(posting_rows.tobytes(), starts, "i")
    index.posting_tfs = KeptPostings(tfs.tobytes(), list(starts), "H")
    # A row's length is its text's: field tokens (``field_words``) add none.
    weights = tfs
    field_words = column("field_words")
    if field_words.size:
        in_text = np.ones(len(words), dtype=np.bool_)
        in_text[field_words] = False
        weights = np.where(np.repeat(in_text, sizes), tfs, 0)
    lengths = np.bincount(posting_rows, weights=weights, minlength=rows)[:rows].astype(np.float32)
    index.doclen[:rows] = lengths
    index.total_len = float(lengths.sum())
