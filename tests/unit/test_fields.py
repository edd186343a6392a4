"""Fields in keyword search: a memory's topics and metadata values count, weighted below its
text (``search.index``, BM25F), in the ranking and in the coverage a score is made of."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from agent_memory.search.columns import Known
from agent_memory.search.index import ActorIndex
from agent_memory.search.keyword import FIELD_WEIGHT, K1, B
from agent_memory.search.measures import coverages
from agent_memory.search.selection import RowFacts, Selection
from agent_memory.search.tokenizer import FIELD_MARK, field_tokens, query_tokens, tokenize

NOW = 1_700_000_000_000
LATER = NOW + 10**9


def _facts(topics=(), metadata=None):
    return RowFacts(valid_from=NOW, fields=field_tokens(list(topics), metadata or {}))


def _index(rows):
    """``rows``: (text, topics, metadata) per memory ``m0``, ``m1``..."""
    index = ActorIndex(dimensions=len(rows) + 1)
    for i, (text, topics, metadata) in enumerate(rows):
        vector = np.eye(len(rows) + 1, dtype=np.float32)[i]
        index.upsert(
            f"m{i}", vector, text, "semantic", NOW, LATER, Known.one(None, _facts(topics, metadata))
        )
    return index


def _ids(hits):
    return [h.memory_id for h in hits]


def test_a_topic_or_a_metadata_value_finds_a_memory_whose_text_lacks_the_word():
    index = _index(
        [
            ("planted tomatoes on the balcony", ["gardening"], {}),
            ("the parcel never came", [], {"order": "ORD-2291", "carrier": {"name": "DHL"}}),
            ("likes green tea", [], {}),
        ]
    )
    assert _ids(index.keyword("gardening", 5, NOW, None)) == ["m0"]
    assert _ids(index.keyword("where is ORD-2291?", 5, NOW, None)) == ["m1"]
    assert _ids(index.keyword("dhl", 5, NOW, None)) == ["m1"]


def test_metadata_keys_booleans_and_nulls_are_not_words_of_a_memory():
    index = _index([("a note", [], {"carrier": True, "order": None, "count": 3, "ratio": 2.0})])
    for query in ("carrier", "order", "count", "true", "null", "none"):
        assert index.keyword(query, 5, NOW, None) == [], query
    assert _ids(index.keyword("3", 5, NOW, None)) == ["m0"]
    assert _ids(index.keyword("2", 5, NOW, None)) == ["m0"]  # 2.0 is the number 2


def test_the_text_counts_above_a_field():
    index = _index(
        [
            ("I drink coffee every morning", ["tea"], {}),
            ("I drink tea every morning", [], {}),
        ]
    )
    hits = index.keyword("tea", 5, NOW, None)
    assert _ids(hits) == ["m1", "m0"] and hits[0].score > hits[1].score > 0


def test_bm25f_matches_the_formula():
    rows = [
        ("tea and biscuits", ["tea", "Tea time"], {}),  # text 1, fields hold it
        ("coffee", ["tea"], {"k": "tea tea tea"}),  # fields hold it (however often)
        ("green tea is nice to drink in the long evenings of winter", [], {}),  # text 1
        ("nothing here at all", ["tea"], {}),  # fields hold it; long enough to be damped
        ("a", [], {}),
    ]
    index = _index(rows)
    hits = {h.memory_id: h.score for h in index.keyword("tea", 5, NOW, None)}
    lengths = [len(tokenize(text)) for text, _, _ in rows]
    avgdl = sum(lengths) / len(rows)
    df = 4
    idf = math.log(1 + (len(rows) - df + 0.5) / (df + 0.5))
    text_tf = {0: 1, 2: 1}
    in_fields = {0, 1, 3}
    for i in (0, 1, 2, 3):
        norm = 1 - B + B * lengths[i] / avgdl
        pseudo = text_tf.get(i, 0) / norm + (FIELD_WEIGHT / max(norm, 1.0) if i in in_fields else 0)
        expected = idf * pseudo * (K1 + 1) / (pseudo + K1)
        assert hits[f"m{i}"] == pytest.approx(expected, rel=1e-5)
    assert "m4" not in hits


def test_repeating_a_word_in_fields_earns_nothing_over_a_text_naming_it_once():
    index = _index(
        [
            ("The user moved to Lisbon last spring and loves it", [], {}),
            (
                "Prefers window seats",
                ["lisbon"],
                {"city": "Lisbon", "trip": "Lisbon, Portugal", "more": ["lisbon"] * 50},
            ),
            ("Owns a bike", [], {}),
            ("Drinks tea", [], {}),
        ]
    )
    hits = index.keyword("Lisbon", 5, NOW, None)
    assert _ids(hits) == ["m0", "m1"] and hits[0].score > hits[1].score
    covered = coverages(index, "Lisbon", ["m0", "m1"])
    assert covered["m0"] > covered["m1"]


@settings(max_examples=150, deadline=None)
@given(
    memories=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["tea", "cat", "red", "sun", "box"]), min_size=1, max_size=12),
            st.lists(st.sampled_from(["tea", "cat", "map"]), max_size=4),
        ),
        min_size=2,
        max_size=10,
    ),
    word=st.sampled_from(["tea", "cat"]),
)
def test_a_text_naming_the_word_ranks_above_every_field_only_match(memories, word):
    rows = [(" ".join(text), topics, {}) for text, topics in memories]
    index = _index(rows)
    avgdl = index.total_len / len(rows)
    hits = index.keyword(word, len(rows), NOW, None)
    rank = {h.memory_id: n for n, h in enumerate(hits)}
    in_text = [i for i, (text, _) in enumerate(memories) if word in text]
    field_only = [
        i for i, (text, topics) in enumerate(memories) if word not in text and word in topics
    ]
    assert set(rank) == {f"m{i}" for i in in_text + field_only}
    # BM25's length norm may put a very long text below: up to 5 times the average, never
    bound = (1 / FIELD_WEIGHT - 1 + B) / B
    for i in in_text:
        if len(memories[i][0]) < bound * avgdl:
            assert all(rank[f"m{i}"] < rank[f"m{j}"] for j in field_only)


def test_fields_do_not_lengthen_a_memory():
    index = _index([("short text", ["a b c d e f g h"], {"k": "x " * 200})])
    assert index.doclen[index.rows["m0"]] == 2
    assert index.total_len == 2


def test_a_removed_or_replaced_memory_leaves_no_field_behind():
    index = _index([("first", ["gardening"], {}), ("second", ["gardening"], {})])
    index.remove("m0")
    assert _ids(index.keyword("gardening", 5, NOW, None)) == ["m1"]
    vector = np.eye(3, dtype=np.float32)[1]
    index.upsert(
        "m1", vector, "second", "semantic", NOW, LATER, Known.one(None, _facts(["cooking"]))
    )
    assert index.keyword("gardening", 5, NOW, None) == []
    assert _ids(index.keyword("cooking", 5, NOW, None)) == ["m1"]
    assert index.total_len == 1


def test_a_selection_still_applies_to_memories_found_by_a_field():
    index = _index([("first", ["gardening"], {}), ("second", ["gardening"], {})])
    index.close("m0", NOW + 1)
    assert _ids(index.keyword("gardening", 5, NOW + 2, Selection())) == ["m1"]
    where = Selection(include_superseded=True)
    assert sorted(_ids(index.keyword("gardening", 5, NOW + 2, where))) == ["m0", "m1"]


def test_a_word_held_only_in_a_field_covers_part_of_its_weight():
    index = _index([("likes tea", ["gardening"], {}), ("gardening tips", [], {})])
    covered = coverages(index, "gardening", ["m0", "m1"])
    assert covered["m1"] == pytest.approx(1.0)
    assert covered["m0"] == pytest.approx(FIELD_WEIGHT)
    index.tokens_unknown = True  # as read from a kept form: postings looked up instead
    assert coverages(index, "gardening", ["m0", "m1"]) == pytest.approx(covered)


def test_bulk_adding_with_fields_gives_the_same_index_as_adding_one_by_one():
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((60, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"word{i % 5} text {i}" for i in range(60)]
    facts = [_facts([f"word{i % 3}"], {"n": i % 4}) if i % 2 else None for i in range(60)]
    one = ActorIndex(dimensions=8)
    for i in range(60):
        one.upsert(f"m{i}", vectors[i], texts[i], "semantic", NOW, LATER, Known.one(None, facts[i]))
    bulk = ActorIndex(dimensions=8)
    bulk.add_many(
        [f"m{i}" for i in range(60)],
        vectors,
        texts,
        ["semantic"] * 60,
        [NOW] * 60,
        [LATER] * 60,
        Known(facts=facts),
    )
    assert bulk.total_len == one.total_len
    for query in ("word1", "word2 text", "3", "word0 2"):
        assert bulk.keyword(query, 10, NOW, None) == one.keyword(query, 10, NOW, None)
        ids = [f"m{i}" for i in range(60)]
        assert coverages(bulk, query, ids) == pytest.approx(coverages(one, query, ids))


json_leaf = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none())
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=60),
    topics=st.lists(st.text(max_size=20), max_size=3),
    metadata=st.dictionaries(st.text(max_size=8), json_value, max_size=3),
    query=st.text(max_size=30),
)
def test_no_text_or_query_token_is_ever_a_field_token(text, topics, metadata, query):
    fields = field_tokens(topics, metadata)
    assert all(token.startswith(FIELD_MARK) for token in fields)
    assert not set(tokenize(text)) & set(fields)
    assert not set(query_tokens(query)) & set(fields)
    # every field token is a token of a topic or of some value, marked
    words = set()
    for topic in topics:
        words.update(tokenize(topic))
    assert {token[len(FIELD_MARK) :] for token in fields} >= words


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="abc de", max_size=20), min_size=1, max_size=6),
    query=st.text(alphabet="abc de", max_size=10),
)
def test_an_index_without_fields_ranks_exactly_as_plain_bm25(texts, query):
    plain = ActorIndex(dimensions=2)
    empty = ActorIndex(dimensions=2)
    for i, text in enumerate(texts):
        vector = np.array([1.0, 0.0], dtype=np.float32)
        plain.upsert(f"m{i}", vector, text, "semantic", NOW, LATER)
        empty.upsert(
            f"m{i}", vector, text, "semantic", NOW, LATER, Known.one(None, _facts([], {"k": True}))
        )
    assert empty.keyword(query, 10, NOW, None) == plain.keyword(query, 10, NOW, None)
