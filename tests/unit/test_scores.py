"""Scores on [0, 1]: ``search.scores`` (the coverage of a query's words and the logistic score)
and ``search.measures`` (both measures read off an actor's index), checked against plain
reference computations."""

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from agent_memory.search.index import ActorIndex
from agent_memory.search.measures import cosines, coverages
from agent_memory.search.scores import coverage, idf, relevance
from agent_memory.search.tokenizer import query_tokens, term_counts

NOW = 1_700_000_000_000
LATER = NOW + 10**9
WORDS = ["alice", "lisbon", "tea", "green", "chess", "sunday", "cat", "miso", "moved", "may"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def test_coverage_weighs_each_query_word_by_its_rarity():
    df = {"alice": 9, "lisbon": 1}
    whole = coverage(["alice", "lisbon"], {"alice", "lisbon"}, df, 10)
    common = coverage(["alice", "lisbon"], {"alice"}, df, 10)
    rare = coverage(["alice", "lisbon"], {"lisbon"}, df, 10)
    assert whole == pytest.approx(1.0)
    assert rare > 0.5 > common > 0 and rare + common == pytest.approx(1.0)
    assert rare == pytest.approx(idf(10, 1) / (idf(10, 1) + idf(10, 9)))


def test_a_query_word_no_memory_holds_weighs_the_most():
    # "caroline" is in no memory: a foreign question naming her covers little of itself.
    assert idf(10, 0) > idf(10, 1) > idf(10, 10) > 0
    assert coverage(["caroline", "tea"], {"tea"}, {"tea": 5}, 10) < 0.5
    assert coverage([], {"tea"}, {"tea": 5}, 10) == 0.0


@given(st.floats(-1, 1), st.floats(0, 1))
def test_every_score_is_on_zero_to_one(similarity, covered):
    for score in (
        relevance(similarity, covered),
        relevance(similarity, None),
        relevance(None, covered),
        relevance(None, None),
    ):
        assert 0.0 <= score <= 1.0


@given(st.floats(-1, 1), st.floats(-1, 1), st.floats(0, 1), st.floats(0, 1))
def test_scores_rise_with_each_measure(s1, s2, c1, c2):
    low_s, high_s = sorted((s1, s2))
    low_c, high_c = sorted((c1, c2))
    assert relevance(low_s, low_c) <= relevance(high_s, high_c)
    assert relevance(low_s, None) <= relevance(high_s, None)
    assert relevance(None, low_c) <= relevance(None, high_c)


def _index(rows: list[str], vectors: np.ndarray, compact: bool = False) -> ActorIndex:
    index = ActorIndex(dimensions=vectors.shape[1], compact_above_bytes=1024 if compact else None)
    for i, text in enumerate(rows):
        index.upsert(f"m{i}", vectors[i], text, "semantic", NOW, LATER)
    return index


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=12), texts)
def test_the_index_measures_coverage_as_the_plain_formula_does(rows, query):
    vectors = np.eye(len(rows), max(len(rows), 2), dtype=np.float32)
    index = _index(rows, vectors)
    sets = [set(term_counts(text)) for text in rows]
    df = Counter(word for words in sets for word in words)
    ids = [f"m{i}" for i in range(len(rows))]
    measured = coverages(index, query, ids)
    index.tokens_unknown = True  # as read from a kept form: the postings are looked up instead
    assert coverages(index, query, ids) == pytest.approx(measured, abs=1e-12)
    index.tokens_unknown = False
    for i, words in enumerate(sets):
        expected = coverage(query_tokens(query), words, df, len(rows))
        assert measured[f"m{i}"] == pytest.approx(expected, abs=1e-9)
        assert 0.0 <= measured[f"m{i}"] <= 1.0


@pytest.mark.parametrize("compact", [False, True])
def test_the_index_measures_cosines_exactly_or_within_int8_error(compact):
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = _index([f"memory {i}" for i in range(40)], vectors, compact=compact)
    assert index.compact is compact
    query = vectors[5]
    measured = cosines(index, query, ["m5", "m7", "missing"])
    assert set(measured) == {"m5", "m7"}
    tolerance = 0.02 if compact else 1e-6
    assert measured["m5"] == pytest.approx(1.0, abs=tolerance)
    assert measured["m7"] == pytest.approx(float(vectors[7] @ query), abs=tolerance)
    assert not math.isnan(measured["m7"])
