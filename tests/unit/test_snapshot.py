"""The kept form of an index (``search.snapshot``): what a new container loads must search, select
and change exactly like the index it was dumped from."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.search import snapshot
from agent_memory.search.columns import Known
from agent_memory.search.index import ActorIndex
from agent_memory.search.selection import NEVER, UNKNOWN, RowFacts, Selection, filter_terms
from agent_memory.search.tokenizer import field_tokens

NOW = 1_700_000_000_000
DIM = 12
WORDS = ["alpha", "beta", "gamma", "delta", "coffee", "tea", "paris", "berlin", "run", "runs"]
TYPES = ["semantic", "episodic", "preference"]

vectors = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=DIM, max_size=DIM).filter(
    lambda v: any(abs(x) > 1e-3 for x in v)
)
upsert = st.tuples(
    st.just("upsert"),
    st.integers(0, 40),
    vectors,
    st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join),
    st.sampled_from(TYPES),
    st.integers(0, 5),  # created offset (s)
    st.sampled_from([None, 3, 100]),  # expiry offset (s); None: far away
    st.sampled_from([None, 2]),  # closed at offset (s)
    st.sampled_from([None, -50, 7]),  # occurred offset (s)
    st.lists(st.sampled_from(["Work", "home", "x\x00y", "Coffee"]), max_size=2),
    st.sampled_from([{}, {"k": 1}, {"k": "v", "n": [1, 2]}, {"city": "Paris", "k": "tea"}]),
)
remove = st.tuples(st.just("remove"), st.integers(0, 40))
operations = st.lists(st.one_of(upsert, upsert, remove), max_size=60)


def _unit(values):
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _apply(index, vectors_by_id, operation):
    if operation[0] == "remove":
        index.remove(f"m{operation[1]}")
        return
    _, n, values, text, kind, created, expiry, closed, occurred, topics, metadata = operation
    created_ms = NOW + created * 1000
    facts = RowFacts(
        valid_from=created_ms,
        valid_until=NEVER if closed is None else NOW + closed * 1000,
        occurred=UNKNOWN if occurred is None else NOW + occurred * 1000,
        terms=filter_terms(topics, metadata),
        fields=field_tokens(topics, metadata),
    )
    expires = NOW + (10**9 if expiry is None else expiry * 1000)
    vector = _unit(values)
    vectors_by_id[f"m{n}"] = vector
    index.upsert(f"m{n}", vector, text, kind, created_ms, expires, Known.one(None, facts))


SELECTIONS = [
    Selection(),
    Selection(include_superseded=True),
    Selection(as_of=NOW + 1500),
    Selection(as_of=NOW + 4000, include_superseded=True),
    Selection(types=("episodic", "preference")),
    Selection(topics=("WORK", "x\x00y")),
    Selection(metadata=(("k", 1.0),)),
    Selection(created_after=NOW + 2000, created_before=NOW + 4000),
    Selection(occurred_after=NOW - 60_000),
]


def _same_answers(original, loaded, vectors_by_id, rng):
    """Every read of ``loaded`` answers as ``original`` does (semantic after exact rescoring)."""
    assert sorted(loaded.rows) == sorted(original.rows)
    for moment in (NOW, NOW + 50_000):
        for where in SELECTIONS:
            chosen = sorted(original.selected(moment, where))
            assert sorted(loaded.selected(moment, where)) == chosen
            assert loaded.count(moment, where) == original.count(moment, where)
            for query in ("coffee", "paris runs", "alpha beta tea", "nothing"):
                got = loaded.keyword(query, 5, moment, where)
                want = original.keyword(query, 5, moment, where)
                assert [h.memory_id for h in got] == [h.memory_id for h in want]
                assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-5)
            query = _unit(rng.standard_normal(DIM))
            want = original.semantic(query, 3, moment, where)
            candidates = loaded.semantic(query, 3, moment, where)
            exact = sorted(
                ((float(vectors_by_id[h.memory_id] @ query), h.memory_id) for h in candidates),
                reverse=True,
            )[:3]
            assert [s for s, _ in exact] == pytest.approx([h.score for h in want], abs=1e-5)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=operations, after=operations)
def test_a_loaded_index_answers_and_changes_as_the_one_dumped(before, after):
    rng = np.random.default_rng(3)
    original = ActorIndex(dimensions=DIM, gen=17)
    vectors_by_id: dict[str, np.ndarray] = {}
    for operation in before:
        _apply(original, vectors_by_id, operation)
    loaded = snapshot.load(snapshot.dump(original), DIM)
    assert loaded is not None and loaded.gen == 17 and loaded.kept == 17 and not loaded.exact
    _same_answers(original, loaded, vectors_by_id, rng)
    for operation in after:  # removals rebuild the rows' token lists from the postings
        _apply(original, vectors_by_id, operation)
        _apply(loaded, vectors_by_id, operation)
    _same_answers(original, loaded, vectors_by_id, rng)
    again = snapshot.load(snapshot.dump(loaded), DIM)
    assert again is not None
    _same_answers(original, again, vectors_by_id, rng)


def _sample(rows=300, dimensions=DIM):
    rng = np.random.default_rng(5)
    index = ActorIndex(dimensions=dimensions, gen=4)
    for n in range(rows):
        vector = _unit(rng.standard_normal(dimensions))
        text = f"{WORDS[n % 10]} {WORDS[n % 7]}"
        index.upsert(f"m{n}", vector, text, "semantic", NOW, NOW + 10**9)
    return index


def test_a_kept_form_split_in_parts_loads_from_them_in_order(monkeypatch):
    monkeypatch.setattr(snapshot, "PART_BYTES", 4000)
    original = _sample()
    parts = snapshot.dump(original, max_parts=8)
    assert len(parts) > 3 and all(len(p) == 4000 for p in parts[:-1])
    assert snapshot.header(parts)["parts"] == len(parts)
    loaded = snapshot.load(parts, DIM)
    assert loaded is not None and sorted(loaded.rows) == sorted(original.rows)
    assert snapshot.load(parts[:-1], DIM) is None  # cut short
    assert snapshot.dump(original, max_parts=2) == []  # too large to keep


def test_a_kept_form_of_another_setting_or_no_kept_form_at_all_is_not_read():
    parts = snapshot.dump(_sample())
    assert snapshot.load(parts, DIM + 1) is None
    assert snapshot.load([b"not an index"], DIM) is None
    assert snapshot.load([], DIM) is None
    assert snapshot.load([parts[0][:40]], DIM) is None
    damaged = bytearray(parts[0])
    damaged[-200:] = bytes(200)  # postings of rows that are not there, or counts that disagree
    loaded = snapshot.load([bytes(damaged)], DIM)
    assert loaded is None or len(loaded) == 300


def test_an_empty_index_round_trips():
    loaded = snapshot.load(snapshot.dump(ActorIndex(dimensions=DIM, gen=2)), DIM)
    assert loaded is not None and len(loaded) == 0 and loaded.gen == 2
    assert loaded.keyword("coffee", 3, NOW, None) == []


def test_a_loaded_index_goes_exact_with_the_vectors_read_and_those_entered_meanwhile():
    rng = np.random.default_rng(12)
    original = _sample(rows=120)
    vectors = {i: original.matrix[row].tobytes() for i, row in original.rows.items()}
    loaded = snapshot.load(snapshot.dump(original), DIM)
    assert loaded is not None and loaded.compact and loaded.fits_exact
    loaded.pending = {}
    extra = _unit(rng.standard_normal(DIM))
    for index in (original, loaded):  # entered while the exact vectors are read
        index.upsert("late", extra, "tea", "semantic", NOW, NOW + 10**9)
        index.remove("m3")
    assert loaded.go_exact(vectors) and loaded.exact and loaded.pending is None
    for query in _unit(rng.standard_normal((5, DIM))):
        assert loaded.semantic(query, 10, NOW, None) == original.semantic(query, 10, NOW, None)


def test_an_index_missing_a_vector_stays_compact():
    original = _sample(rows=80)
    vectors = {i: original.matrix[row].tobytes() for i, row in original.rows.items()}
    del vectors["m7"]
    loaded = snapshot.load(snapshot.dump(original), DIM)
    loaded.pending = {}
    assert not loaded.go_exact(vectors) and loaded.compact and loaded.pending is None


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=8)), min_size=1, max_size=4)
)
def test_a_damaged_kept_form_is_refused_or_read_never_raises(cuts):
    blob = bytearray(snapshot.dump(_sample(rows=40))[0])
    for at, junk in cuts:
        at %= len(blob)
        blob[at : at + len(junk)] = junk
    loaded = snapshot.load([bytes(blob)], DIM)
    if loaded is not None:  # damage that left it readable: it still answers
        loaded.keyword("alpha", 3, NOW, None)
        loaded.semantic(_unit(np.ones(DIM)), 3, NOW, None)


def test_memory_ids_are_kept_as_their_digits_and_read_back_exactly():
    rng = np.random.default_rng(4)
    index = ActorIndex(dimensions=DIM, gen=3)
    ids = [f"mem_{rng.bytes(10).hex()}" for _ in range(50)]
    for n, memory_id in enumerate(ids):
        index.upsert(
            memory_id, _unit(rng.standard_normal(DIM)), WORDS[n % 10], "semantic", NOW, NOW + 10**9
        )
    parts = snapshot.dump(index)
    names = [section[0] for section in snapshot.header(parts)["sections"]]
    assert "id_digits" in names and "ids" not in names
    loaded = snapshot.load(parts, DIM)
    assert loaded is not None and loaded.ids == ids and loaded.rows == index.rows


def test_any_character_of_a_text_reads_back_nul_included():
    index = ActorIndex(dimensions=DIM, gen=1)
    rng = np.random.default_rng(6)
    texts = ["weird foo\x00bar token", "tab\there", "emoji 🙂 and 中文", 'quote " back \\ slash']
    for n, text in enumerate(texts):
        index.upsert(f"m{n}", _unit(rng.standard_normal(DIM)), text, "semantic", NOW, NOW + 10**9)
    loaded = snapshot.load(snapshot.dump(index), DIM)
    assert loaded is not None and loaded.vocabulary == index.vocabulary
    for query in ("weird", "foo\x00bar", "中文", "slash"):
        assert loaded.keyword(query, 4, NOW, None) == index.keyword(query, 4, NOW, None)


def test_a_header_nested_past_the_parsers_depth_is_refused():
    deep = b"[" * 200_000
    blob = snapshot.MAGIC + len(deep).to_bytes(4, "little") + deep
    assert snapshot.header([blob]) is None and snapshot.load([blob], DIM) is None


def test_near_duplicates_closer_than_int8_can_tell_are_all_rescored():
    rng = np.random.default_rng(14)
    dims = 64
    centre = _unit(rng.standard_normal(dims))
    vectors = [_unit(centre + rng.standard_normal(dims) * 0.001) for _ in range(300)]
    original = ActorIndex(dimensions=dims, gen=1)
    for n, vector in enumerate(vectors):
        original.upsert(f"m{n}", vector, "same words", "semantic", NOW, NOW + 10**9)
    loaded = snapshot.load(snapshot.dump(original), dims)
    assert loaded is not None and not loaded.exact
    for n in (0, 77, 299):  # each memory's own vector: it must come back first
        candidates = [h.memory_id for h in loaded.best_match(vectors[n], NOW)]
        rescored = max(candidates, key=lambda i: float(vectors[int(i[1:])] @ vectors[n]))
        assert rescored == f"m{n}", (n, len(candidates))


@given(st.lists(st.binary(min_size=10, max_size=10), max_size=40), st.binary(max_size=9))
def test_memory_ids_read_from_their_digits_are_each_ten_bytes_in_hex(digits, tail):
    ids = snapshot._memory_ids(b"".join(digits))
    assert ids == [f"mem_{one.hex()}" for one in digits]
    if tail:
        with pytest.raises(ValueError):
            snapshot._memory_ids(b"".join(digits) + tail)
