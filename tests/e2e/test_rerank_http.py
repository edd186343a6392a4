"""The rerank stage over HTTP: a store whose reranker is a loopback server of Cohere's shape
(``custom``) orders search and recall results and says so; a failing reranker leaves the fused
order with ``"reranked": false``; the settings are checked and the key is write-only."""

from __future__ import annotations

import json

import pytest

from tests.support.common import unique
from tests.support.http import BASE, assert_error
from tests.support.model_servers import ScriptedChatServer
from tests.support.rerank_servers import RerankServer

DIM = 4
KEY = "rk-live-0123456789abcdefghijSECRET"
TEXTS = [
    ("Alice drinks green tea every morning", [1, 0, 0, 0]),
    ("Alice moved to Lisbon in May 2023", [0.6, 0.8, 0, 0]),
    ("Alice adopted a cat named Miso", [0.5, 0, 0.866, 0]),
    ("Alice plays chess on Sundays", [0.4, 0, 0, 0.9165]),
]


@pytest.fixture
def reranker():
    with RerankServer("cohere") as server:
        yield server


@pytest.fixture
def store(api, reranker):
    name = unique("store")
    body = {
        "dimensions": DIM,
        "rerank_provider": "custom",
        "rerank_model": "bge-test",
        "rerank_base_url": reranker.url,
        "rerank_api_key": KEY,
        "rerank_candidates": 3,
    }
    answer = api.put(f"{BASE}/{name}", json=body)
    assert answer.status_code == 201, answer.text
    for text, vector in TEXTS:
        added = api.post(
            f"{BASE}/{name}/memories", json={"text": text, "vector": vector, "actor_id": "alice"}
        )
        assert added.status_code == 201
    yield f"{BASE}/{name}"
    api.delete(f"{BASE}/{name}")


def search(api, store, **body):
    query = {"query": "cat Miso", "mode": "semantic", "actor_id": "alice", "limit": 2}
    answer = api.post(
        f"{store}/memories/search", json={**query, "query_vector": [1, 0, 0, 0], **body}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_store_shows_its_reranker_but_never_its_key(api, store, reranker):
    shown = api.get(store).json()
    assert shown["rerank_provider"] == "custom" and shown["rerank_model"] == "bge-test"
    assert shown["rerank_base_url"] == reranker.url and shown["has_rerank_api_key"] is True
    assert shown["rerank_candidates"] == 3 and KEY not in api.get(store).text


def test_a_search_is_reranked_from_the_fused_candidates(api, store, reranker):
    found = search(api, store)
    assert found["reranked"] is True
    assert [m["text"] for m in found["memories"]] == [TEXTS[2][0], TEXTS[0][0]]
    assert found["memories"][0]["score"] == pytest.approx(1.0)
    sent = reranker.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["documents"] == [t for t, _ in TEXTS[:3]]  # rerank_candidates, fused order
    assert sent.body["top_n"] == 2


def test_a_search_can_skip_the_reranker(api, store, reranker):
    found = search(api, store, rerank=False)
    assert found["reranked"] is None and [m["text"] for m in found["memories"]] == [
        TEXTS[0][0],
        TEXTS[1][0],
    ]
    assert reranker.requests == []


@pytest.mark.parametrize("fault", ["500", "garbage", "slow"])
def test_a_failing_reranker_leaves_the_fused_order(api, store, reranker, fault):
    if fault == "500":
        reranker.fail(500)
        reranker.fail(500)
    elif fault == "garbage":
        reranker.garbage({"results": [{"index": 0}]})
    else:
        reranker.delay = 4.0  # past the rerank stage's 2.5 s deadline
    found = search(api, store)
    assert found["reranked"] is False
    assert [m["text"] for m in found["memories"]] == [TEXTS[0][0], TEXTS[1][0]]


def test_recall_is_reranked_too(api, store, reranker):
    answer = api.post(
        f"{store}/recall",
        json={
            "session_id": "s-1",
            "actor_id": "alice",
            "query": "cat Miso",
            "query_vector": [1, 0, 0, 0],
            "limit": 1,
        },
    )
    assert answer.status_code == 200, answer.text
    recalled = answer.json()
    assert recalled["reranked"] is True
    assert [m["text"] for m in recalled["memories"]] == [TEXTS[2][0]]
    assert "Miso" in recalled["context"]


def test_usage_counts_the_reranker_calls_that_answered_and_their_documents(api, store, reranker):
    search(api, store)  # 3 candidates (rerank_candidates)
    search(api, store, rerank=False)
    reranker.fail(500)
    reranker.fail(500)
    assert search(api, store)["reranked"] is False  # a failed call is not billed
    answer = api.post(
        f"{store}/recall",
        json={
            "session_id": "s-1",
            "actor_id": "alice",
            "query": "cat Miso",
            "query_vector": [1, 0, 0, 0],
            "limit": 1,
        },
    )
    assert answer.json()["reranked"] is True
    days = api.get(f"{store}/usage").json()["days"]
    today = max(days, key=lambda day: day["date"])
    assert (today["rerank_calls"], today["rerank_documents"]) == (2, 6)
    assert today["llm_input_tokens"] == 0


def test_bad_reranker_settings_are_422_naming_the_problem_and_change_nothing(api, store):
    before = api.get(store).json()
    cases = [
        (
            {"rerank_provider": "llm"},
            "body",
            "rerank_provider 'llm' scores with the store's language model: set llm_provider first",
        ),
        (
            {"rerank_provider": "cohere", "rerank_model": None},
            "body",
            "rerank_model is required when rerank_provider is 'cohere'",
        ),
        (
            {"rerank_provider": "cohere", "rerank_api_key": "other-key-0123456789"},
            "body",
            "rerank_base_url is only used when rerank_provider is 'custom'",
        ),
        ({"rerank_candidates": 0}, "rerank_candidates", "greater than or equal to 1"),
        ({"rerank_candidates": 201}, "rerank_candidates", "less than or equal to 200"),
        ({"rerank_provider": "sentient"}, "rerank_provider", "'none', 'cohere', 'voyage'"),
        ({"rerank_api_key": ""}, "rerank_api_key", "at least 1 character"),
        (
            {"rerank_base_url": "ftp://reranker.example/v1"},
            "body",
            "rerank_base_url must be an http(s):// URL with a host name",
        ),
    ]
    for body, field, problem in cases:
        answer = api.put(store, json=body)
        details = assert_error(answer, 422, "validation_error")["details"]
        assert [d["field"] for d in details] == [field], (body, details)
        assert problem in details[0]["problem"], (body, details)
    after = api.get(store).json()
    assert after == before  # nothing changed, the key included (has_rerank_api_key, updated_at)


def test_changing_the_reranker_drops_its_key_and_a_hosted_one_needs_a_new_one(api, store, reranker):
    before = api.get(store).json()
    refused = api.put(
        store,
        json={"rerank_provider": "cohere", "rerank_base_url": None, "rerank_model": "rerank-v3.5"},
    )
    details = assert_error(refused, 422, "validation_error")["details"]
    assert details == [{"field": "rerank_api_key", "problem": "required by 'cohere'"}]
    assert api.get(store).json() == before  # nothing changed, the key kept
    moved = api.put(store, json={"rerank_base_url": reranker.url + "/"})  # custom: keyless is fine
    assert moved.status_code == 200, moved.text
    assert moved.json()["has_rerank_api_key"] is False  # never sent to another address
    voyage = {"rerank_provider": "voyage", "rerank_base_url": None, "rerank_model": "rerank-2"}
    given = api.put(store, json={**voyage, "rerank_api_key": "pa-0123456789"})
    assert given.status_code == 200 and given.json()["has_rerank_api_key"] is True
    for provider in ("jina", "cohere"):  # another hosted provider: its key is dropped, so refused
        answer = api.put(store, json={"rerank_provider": provider})
        assert assert_error(answer, 422, "validation_error")["details"][0]["field"] == (
            "rerank_api_key"
        )


def test_the_python_client_reads_and_asks_for_the_rerank_stage(memory, store, reranker):
    handle = memory.store("local", store.rsplit("/", 1)[1])
    found = handle.search(
        "cat Miso", mode="semantic", actor_id="alice", query_vector=[1, 0, 0, 0], limit=1
    )
    assert found.reranked is True and found.memories[0].text == TEXTS[2][0]
    skipped = handle.recall("s-2", "cat Miso", "alice", 1, [1, 0, 0, 0], rerank=False)
    assert skipped.reranked is None and skipped.memories[0].text == TEXTS[0][0]
    shown = memory.get_store("local", handle.name)
    assert shown.rerank_provider == "custom" and shown.has_rerank_api_key is True


def test_the_llm_reranker_scores_with_the_stores_model_and_counts_its_tokens(api, memory):
    name = unique("store")
    with ScriptedChatServer("openai") as model:
        body = {
            "dimensions": DIM,
            "llm_provider": "custom",
            "llm_model": "tiny",
            "llm_base_url": model.url,
            "rerank_provider": "llm",
        }
        assert api.put(f"{BASE}/{name}", json=body).status_code == 201
        try:
            for text, vector in TEXTS:
                api.post(
                    f"{BASE}/{name}/memories",
                    json={"text": text, "vector": vector, "actor_id": "alice"},
                )
            scores = [{"n": n, "score": s} for n, s in ((1, 0.1), (2, 0.2), (3, 0.9), (4, 0.3))]
            model.reply(json.dumps({"scores": scores}), input_tokens=321, output_tokens=45)
            found = api.post(
                f"{BASE}/{name}/memories/search",
                json={
                    "query": "cat Miso",
                    "mode": "semantic",
                    "actor_id": "alice",
                    "query_vector": [1, 0, 0, 0],
                    "limit": 2,
                },
            ).json()
            assert found["reranked"] is True
            assert [m["text"] for m in found["memories"]] == [TEXTS[2][0], TEXTS[3][0]]
            prompt = model.requests[-1].body["messages"][-1]["content"]
            assert '[3] "Alice adopted a cat named Miso"' in prompt
            day = memory.store("local", name).usage().days[-1]
            assert (day.llm_input_tokens, day.llm_output_tokens) == (321, 45)
        finally:
            api.delete(f"{BASE}/{name}")
