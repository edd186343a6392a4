"""Scores over HTTP: every search and recall result scores on [0, 1] with the store's formula
(``search.scores.relevance`` of its cosine and its coverage of the query's words), carries its
cosine as ``similarity``, and ``min_score`` leaves out what scores below it (by default
nothing); a bad ``min_score`` is 422 naming the field."""

from __future__ import annotations

import math

import pytest

from agent_memory.search.scores import RECOMMENDED_MIN_SCORE, relevance
from tests.support.common import unique
from tests.support.http import BASE, assert_error

DIM = 4
MEMORIES = [
    ("Alice moved to Lisbon in May", [1, 0, 0, 0]),
    ("Alice drinks green tea", [0.6, 0.8, 0, 0]),
    ("Bob plays chess on Sundays", [0, 0, 1, 0]),
]


@pytest.fixture
def store(api):
    path = f"{BASE}/{unique('store')}"
    assert api.put(path, json={"dimensions": DIM}).status_code == 201
    for text, vector in MEMORIES:
        answer = api.post(
            f"{path}/memories", json={"text": text, "vector": vector, "actor_id": "alice"}
        )
        assert answer.status_code == 201, answer.text
    yield path
    api.delete(path)


def search(api, store, **body):
    query = {"query": "Lisbon move", "actor_id": "alice", **body}
    answer = api.post(f"{store}/memories/search", json=query)
    assert answer.status_code == 200, answer.text
    return answer.json()["memories"]


def test_semantic_scores_follow_the_cosine_and_report_it(api, store):
    found = search(api, store, mode="semantic", query_vector=[1, 0, 0, 0], min_score=0)
    assert [m["text"] for m in found] == [t for t, _ in MEMORIES]
    for memory, cosine in zip(found, (1.0, 0.6, 0.0), strict=True):
        assert memory["similarity"] == pytest.approx(cosine, abs=1e-6)
        assert memory["score"] == pytest.approx(relevance(cosine, None), abs=1e-6)
    assert found[0]["score"] > found[1]["score"] > found[2]["score"] >= 0


def test_keyword_scores_come_from_the_share_of_query_words_a_memory_holds(api, store):
    found = search(api, store, mode="keyword", query="Lisbon chess", min_score=0)
    assert {m["text"] for m in found} == {MEMORIES[0][0], MEMORIES[2][0]}
    for memory in found:
        assert memory["similarity"] is None
        assert memory["score"] == pytest.approx(relevance(None, 0.5), abs=1e-6)  # one of two


def test_hybrid_scores_use_both_measures_and_stay_on_zero_to_one(api, store):
    found = search(api, store, mode="hybrid", query_vector=[1, 0, 0, 0], min_score=0)
    top = found[0]
    assert top["text"] == MEMORIES[0][0] and top["similarity"] == pytest.approx(1.0, abs=1e-6)
    assert top["score"] == pytest.approx(relevance(1.0, 1.0), abs=1e-6)  # "lisbon", "move"
    assert all(0.0 <= m["score"] <= 1.0 for m in found)


def test_min_score_leaves_out_what_scores_below_it(api, store):
    everything = search(api, store, mode="semantic", query_vector=[1, 0, 0, 0], min_score=0)
    cut = everything[1]["score"]
    kept = search(api, store, mode="semantic", query_vector=[1, 0, 0, 0], min_score=cut)
    assert [m["text"] for m in kept] == [m["text"] for m in everything[:2]]
    assert search(api, store, mode="semantic", query_vector=[1, 0, 0, 0], min_score=1) == []
    assert search(api, store, mode="semantic", query_vector=[1, 0, 0, 0]) == everything
    recommended = search(
        api, store, mode="semantic", query_vector=[1, 0, 0, 0], min_score=RECOMMENDED_MIN_SCORE
    )
    assert relevance(0.0, None) < RECOMMENDED_MIN_SCORE  # the orthogonal memory is left out
    assert [m["text"] for m in recommended] == [m["text"] for m in everything[:2]]


def test_recall_takes_min_score_too(api, store):
    body = {
        "session_id": unique("s"),
        "actor_id": "alice",
        "query": "Lisbon move",
        "query_vector": [1, 0, 0, 0],
    }
    every = api.post(f"{store}/recall", json={**body, "min_score": 0}).json()["memories"]
    best = api.post(f"{store}/recall", json={**body, "min_score": 0.999}).json()["memories"]
    assert len(every) == 3 and all(0 <= m["score"] <= 1 for m in every)
    assert [m["text"] for m in best] == [m["text"] for m in every if m["score"] >= 0.999]


@pytest.mark.parametrize("bad", [-0.01, 1.01, "high", True, [0.5], math.inf])
def test_a_min_score_off_zero_to_one_is_422(api, store, bad):
    body = {"query": "Lisbon", "mode": "keyword", "actor_id": "alice", "min_score": bad}
    if bad is math.inf:
        content = b'{"query": "Lisbon", "mode": "keyword", "actor_id": "alice", "min_score": 1e999}'
        answer = api.post(
            f"{store}/memories/search",
            content=content,
            headers={"Content-Type": "application/json"},
        )
    else:
        answer = api.post(f"{store}/memories/search", json=body)
    details = assert_error(answer, 422, "validation_error")["details"]
    assert [d["field"] for d in details] == ["min_score"], details
    recall = {"session_id": "s", "actor_id": "alice", "min_score": bad}
    if bad is not math.inf:
        details = assert_error(api.post(f"{store}/recall", json=recall), 422, "validation_error")
        assert [d["field"] for d in details["details"]] == ["min_score"]
