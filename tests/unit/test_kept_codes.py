"""A kept form read without its int8 codes (``search.snapshot.load_head``, format 4): searches
pre-filter by the kept sign bits and fetch only their candidates' codes, changes fetch every code
first, and the results after exact rescoring are those of the whole form and of an exact scan
(hit@10 on the clustered vectors of ``bench.cold_start``). Kept forms of format 3 (codes before
the scales, no sign bits) still load."""

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings

from agent_memory.search import snapshot
from agent_memory.search.index import FETCHED_CANDIDATES, ActorIndex
from bench.latency import CLUSTERS, SEED, Corpus
from tests.unit.test_snapshot import DIM, NOW, _apply, _same_answers, _sample, operations


class BytesCodes:
    """A ``CodeSource`` over a dumped form's bytes, counting the rows it was asked for."""

    def __init__(self, blob: bytes) -> None:
        head = snapshot.header([blob])
        self.offset, self.width = snapshot.code_span(head)
        self.blob, self.count = blob, int(head["rows"])
        self.asked: list[int] = []
        self.whole = 0

    def rows(self, rows):
        self.asked += rows.tolist()
        at = [self.offset + r * self.width for r in rows.tolist()]
        picked = [self.blob[a : a + self.width] for a in at]
        return np.frombuffer(b"".join(picked), dtype=np.int8).reshape(len(picked), self.width)

    def all(self):
        self.whole += 1
        end = self.offset + self.count * self.width
        return np.frombuffer(self.blob[self.offset : end], dtype=np.int8).reshape(-1, self.width)


def _head_only(index, dimensions):
    (blob,) = snapshot.dump(index)
    head = snapshot.header([blob])
    length = snapshot.head_bytes(head)
    assert length is not None and length <= len(blob)
    source = BytesCodes(blob)
    loaded = snapshot.load_head(blob[:length], dimensions, source)
    assert loaded is not None and loaded.codes_source is source and not loaded.bits_unknown
    return loaded, source


def _exact(index, ids, query, limit=10):
    """A compact search's candidates rescored exactly (``ActorIndexes.rescore``)."""
    hits = index.semantic(query, limit, NOW, None)
    scored = sorted(((float(ids[h.memory_id] @ query), h.memory_id) for h in hits), reverse=True)
    return [memory_id for _, memory_id in scored[:limit]]


@settings(max_examples=60, deadline=None)
@given(before=operations, after=operations)
def test_an_index_read_without_its_codes_answers_and_changes_as_the_one_dumped(before, after):
    rng = np.random.default_rng(3)
    original = ActorIndex(dimensions=DIM, gen=17)
    vectors_by_id: dict[str, np.ndarray] = {}
    for operation in before:
        _apply(original, vectors_by_id, operation)
    whole = snapshot.load(snapshot.dump(original), DIM)
    loaded, _ = _head_only(original, DIM)
    _same_answers(original, loaded, vectors_by_id, rng)
    for operation in after:  # the first change fetches every code first
        for index in (original, whole, loaded):
            _apply(index, vectors_by_id, operation)
    _same_answers(original, loaded, vectors_by_id, rng)
    assert snapshot.dump(loaded) == snapshot.dump(whole)


def test_a_search_fetches_only_its_candidates_codes_and_a_change_fetches_them_all():
    original = _sample(rows=FETCHED_CANDIDATES * 2)
    loaded, source = _head_only(original, DIM)
    query = original.matrix[5].copy()
    loaded.semantic(query, 10, NOW, None)
    assert len(source.asked) == FETCHED_CANDIDATES and source.whole == 0
    assert loaded.codes.shape[0] == 0  # none held yet
    loaded.remove("m1")
    assert source.whole == 1 and loaded.codes_source is None
    assert loaded.codes.shape == (FETCHED_CANDIDATES * 2, DIM)


@pytest.mark.parametrize("size", [10_000, 30_000])
def test_the_first_search_finds_the_exact_top_ten_as_the_whole_form_does(size):
    # hit@10 against the exact scan, on the benchmark's clustered 1,536-dimension vectors:
    # the index read without its codes (sign bits, then FETCHED_CANDIDATES rows' codes, then
    # exact rescoring) finds every exact top ten that the whole form finds.
    corpus = Corpus(1536, SEED)
    rng = np.random.default_rng([SEED, size])
    matrix = np.concatenate(
        [corpus.vectors(rng, rng.integers(0, CLUSTERS, size=2000)) for _ in range(size // 2000)]
    )
    index = ActorIndex(dimensions=1536, gen=1)
    ids = [f"mem_{n:020x}" for n in range(size)]
    index.add_many(ids, matrix, ["x"] * size, ["semantic"] * size, [NOW] * size, [NOW * 2] * size)
    vectors = dict(zip(ids, matrix, strict=True))
    whole = snapshot.load(snapshot.dump(index), 1536)
    head_hits = whole_hits = 0
    for query in corpus.queries(np.random.default_rng([SEED, 3, size]), 20):
        exact = [ids[i] for i in np.argsort(-(matrix @ query.vector))[:10]]
        loaded, _ = _head_only(index, 1536)
        head_hits += len(set(_exact(loaded, vectors, query.vector)) & set(exact))
        whole_hits += len(set(_exact(whole, vectors, query.vector)) & set(exact))
    assert head_hits >= whole_hits and whole_hits == 200


def _as_format_3(blob: bytes) -> bytes:
    """A form 4 kept form rewritten as form 3 wrote it: no sign bits, its header saying 3."""
    head = snapshot.header([blob])
    data = blob[head.pop("_data") :]
    head["format"] = 3
    head["sections"] = [s for s in head["sections"] if s[0] != "bits"]
    text = json.dumps(head).encode()
    start = 8 + len(text) + (-(8 + len(text))) % 8
    padding = bytes(start - 8 - len(text))
    return snapshot.MAGIC + struct.pack("<I", len(text)) + text + padding + data


def test_a_kept_form_of_format_3_still_loads_and_knows_its_bits_when_needed():
    original = _sample(rows=400)
    old = _as_format_3(snapshot.dump(original)[0])
    assert snapshot.head_bytes(snapshot.header([old])) is None  # read whole, as before
    loaded = snapshot.load([old], DIM)
    assert loaded is not None and loaded.bits_unknown and loaded.codes_source is None
    current = snapshot.load(snapshot.dump(original), DIM)
    rng = np.random.default_rng(8)
    for query in rng.standard_normal((5, DIM)).astype(np.float32):
        query /= np.linalg.norm(query)
        assert loaded.semantic(query, 10, NOW, None) == current.semantic(query, 10, NOW, None)
    loaded._know_bits()
    assert np.array_equal(loaded.bits[:400], current.bits[:400])
    assert snapshot.header(snapshot.dump(loaded))["format"] == snapshot.FORMAT == 4
