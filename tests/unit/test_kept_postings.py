"""Postings read from a kept form are made word by word at first use
(``search.kept_postings.KeptPostings``): they must read, grow and change exactly as the list of
arrays they stand for, and an index loaded with them must answer and change as the one dumped,
whichever words were read first."""

from array import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.search import snapshot
from agent_memory.search.index import ActorIndex
from agent_memory.search.kept_postings import KeptPostings
from tests.unit.test_snapshot import DIM, _apply, _same_answers, operations

postings = st.lists(st.lists(st.integers(0, 2**31 - 1), max_size=6), max_size=12)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(-14, 14)),
        st.tuples(st.just("grow"), st.integers(-14, 14), st.integers(0, 2**31 - 1)),
        st.tuples(st.just("drop"), st.integers(-14, 14)),
        st.tuples(st.just("append"), st.lists(st.integers(0, 2**31 - 1), max_size=3)),
        st.tuples(st.just("slice"), st.integers(-14, 14), st.integers(-14, 14)),
    ),
    max_size=25,
)


def _kept(words: list[list[int]]) -> KeptPostings:
    sizes = [len(word) for word in words]
    data = array("i", [n for word in words for n in word]).tobytes()
    return KeptPostings(data, [0, *np.cumsum(sizes, dtype=np.int64).tolist()], "i")


@given(words=postings, script=steps)
def test_kept_postings_read_grow_and_change_as_a_list_of_arrays(words, script):
    kept, plain = _kept(words), [array("i", word) for word in words]
    for step in script:
        kind = step[0]
        if kind == "append":
            kept.append(array("i", step[1]))
            plain.append(array("i", step[1]))
        elif kind == "slice":
            assert [list(a) for a in kept[step[1] : step[2]]] == [
                list(a) for a in plain[step[1] : step[2]]
            ]
        else:
            try:
                want = plain[step[1]]
            except IndexError:
                with pytest.raises(IndexError):
                    kept[step[1]]
                continue
            got = kept[step[1]]
            assert got is kept[step[1]]  # the same array each time: changes stay
            if kind == "grow":
                got.append(step[2])
                want.append(step[2])
            elif kind == "drop" and want:
                del got[0]
                del want[0]
        assert len(kept) == len(plain)
        assert kept.entries() == sum(len(a) for a in plain)
    assert [list(a) for a in kept] == [list(a) for a in plain]


def test_a_kept_word_is_neither_replaced_nor_removed_nor_added_but_at_the_end():
    kept = _kept([[1, 2], [3]])
    with pytest.raises(TypeError):
        kept[0] = array("i")
    with pytest.raises(TypeError):
        del kept[0]
    with pytest.raises(TypeError):
        kept.insert(0, array("i"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=operations, after=operations)
def test_an_index_changed_before_any_search_answers_as_the_one_dumped(before, after):
    """Changes reach words whose postings were never read (made at that change)."""
    rng = np.random.default_rng(4)
    original = ActorIndex(dimensions=DIM, gen=3)
    vectors_by_id: dict[str, np.ndarray] = {}
    for operation in before:
        _apply(original, vectors_by_id, operation)
    loaded = snapshot.load(snapshot.dump(original), DIM)
    assert loaded is not None
    kept = loaded.posting_rows
    assert isinstance(kept, KeptPostings)
    assert kept.entries() == sum(len(rows) for rows in original.posting_rows)
    for operation in after:
        _apply(original, vectors_by_id, operation)
        _apply(loaded, vectors_by_id, operation)
    _same_answers(original, loaded, vectors_by_id, rng)
