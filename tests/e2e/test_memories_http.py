"""Long-term memory over HTTP through the local stack: add with a vector, find it again with
each mode, change, forget, and recall with memories."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.e2e.test_http import BASE, assert_error

DIM = 4


@pytest.fixture
def store(api):
    name = unique("store")
    assert api.put(f"{BASE}/{name}", json={"dimensions": DIM}).status_code == 201
    yield f"{BASE}/{name}"
    api.delete(f"{BASE}/{name}")


def _add(api, store, text, vector, actor="user-7", **fields):
    return api.post(
        f"{store}/memories", json={"text": text, "vector": vector, "actor_id": actor, **fields}
    )


def test_add_then_find_with_each_mode(api, store):
    added = _add(api, store, "The user deploys to eu-west-1", [1, 0, 0, 0], topics=["infra"])
    assert added.status_code == 201
    memory = added.json()
    assert memory["duplicate"] is False and memory["id"].startswith("mem_")
    _add(api, store, "The user likes green tea", [0, 1, 0, 0])
    for mode, extra in (
        ("semantic", {"query_vector": [0.9, 0.1, 0, 0]}),
        ("keyword", {}),
        ("hybrid", {"query_vector": [0.9, 0.1, 0, 0]}),
    ):
        found = api.post(
            f"{store}/memories/search",
            json={"query": "deploy region eu-west-1", "mode": mode, "actor_id": "user-7", **extra},
        )
        assert found.status_code == 200, found.text
        hits = found.json()["memories"]
        assert hits[0]["id"] == memory["id"] and hits[0]["score"] is not None
    assert api.get(store).json()["counts"]["memories"] == 2


def test_duplicates_answer_200_with_the_kept_memory(api, store):
    first = _add(api, store, "Likes tea", [0, 0, 1, 0]).json()
    again = _add(api, store, "Likes tea a lot", [0, 0, 1, 0])
    assert again.status_code == 200
    assert again.json()["duplicate"] is True and again.json()["id"] == first["id"]


def test_bad_memories_are_422_and_keep_nothing(api, store):
    body = assert_error(_add(api, store, "x", [1, 0]), 422, "vector_invalid")
    assert "expected 4 dimensions, got 2" in body["message"]
    assert_error(_add(api, store, "x", None), 422, "vector_required")
    body = assert_error(_add(api, store, "x", [1, 0, 0, 0], type="fact"), 422, "validation_error")
    assert "semantic, episodic" in body["message"]
    assert_error(_add(api, store, "", [1, 0, 0, 0]), 422, "validation_error")
    assert_error(_add(api, store, "x" * 8001, [1, 0, 0, 0]), 422, "validation_error")
    assert_error(_add(api, store, "x", [1, 0, 0, 0], importance=1.5), 422, "validation_error")
    blank = api.post(f"{store}/memories/search", json={"query": "   ", "mode": "keyword"})
    assert_error(blank, 422, "validation_error")
    assert api.get(store).json()["counts"]["memories"] == 0


def test_change_shows_versions_and_forget_removes(api, store):
    memory = _add(api, store, "Lives in Paris", [1, 0, 0, 0]).json()
    changed = api.patch(
        f"{store}/memories/{memory['id']}", json={"text": "Lives in Lisbon", "vector": [0, 1, 0, 0]}
    ).json()
    assert changed["text"] == "Lives in Lisbon"
    assert [v["text"] for v in changed["versions"]] == ["Lives in Paris"]
    assert api.get(f"{store}/memories/{memory['id']}").json()["versions"][0]["text"] == (
        "Lives in Paris"
    )
    assert api.delete(f"{store}/memories/{memory['id']}").status_code == 204
    assert_error(api.get(f"{store}/memories/{memory['id']}"), 404, "memory_not_found")
    assert_error(api.get(f"{store}/memories/not-an-id"), 422, "validation_error")


def test_forget_an_actor_in_one_call(api, store):
    _add(api, store, "a", [1, 0, 0, 0])
    _add(api, store, "b", [0, 1, 0, 0])
    _add(api, store, "c", [0, 0, 1, 0], actor="someone-else")
    forgotten = api.delete(f"{store}/actors/user-7/memories").json()
    assert forgotten == {"actor_id": "user-7", "deleted": 2}
    listed = api.get(f"{store}/memories").json()["memories"]
    assert [m["text"] for m in listed] == ["c"]


def test_listing_filters_by_actor_and_type(api, store):
    _add(api, store, "went hiking on 3 May", [1, 0, 0, 0], type="episodic")
    _add(api, store, "likes hiking", [0, 1, 0, 0])
    _add(api, store, "other", [0, 0, 1, 0], actor="x")
    episodic = api.get(f"{store}/memories", params={"type": "episodic"}).json()["memories"]
    assert [m["text"] for m in episodic] == ["went hiking on 3 May"]
    mine = api.get(f"{store}/memories", params={"actor_id": "user-7", "limit": 1}).json()
    assert [m["text"] for m in mine["memories"]] == ["likes hiking"] and mine["next_offset"] == 1
    assert mine["total"] == 2  # both of user-7's, over every page
    assert api.get(f"{store}/memories").json()["total"] == 3


def test_recall_brings_the_relevant_memories_of_the_sessions_actor(api, store):
    _add(api, store, "Deploys to eu-west-1 on Fridays", [1, 0, 0, 0])
    _add(api, store, "Went to Lisbon in May", [0, 1, 0, 0], type="episodic")
    _add(api, store, "Someone else deploys to us-east-1", [1, 0, 0, 0], actor="other")
    api.post(
        f"{store}/sessions/chat/events",
        json={"actor_id": "user-7", "events": [{"role": "user", "content": "When do we deploy?"}]},
    )
    recalled = api.post(
        f"{store}/recall", json={"session_id": "chat", "query_vector": [1, 0, 0, 0]}
    ).json()
    texts = [m["text"] for m in recalled["memories"]]
    assert texts[0] == "Deploys to eu-west-1 on Fridays"
    assert "Someone else deploys to us-east-1" not in texts
    assert "## Long-term memories about the user" in recalled["context"]
    assert '- [semantic] "Deploys to eu-west-1 on Fridays"' in recalled["context"]
    anonymous = api.post(f"{store}/recall", json={"session_id": "new", "query": "deploy"}).json()
    assert anonymous["memories"] == []
    limited = api.post(
        f"{store}/recall", json={"session_id": "chat", "limit": 1, "query": "deploy Lisbon"}
    ).json()
    assert len(limited["memories"]) == 1


# --- found by trying to break it ------------------------------------------------------------


@pytest.mark.parametrize("field", ["topics", "metadata", "text", "type"])
def test_patching_a_field_to_null_is_422_and_changes_nothing(api, store, field):
    memory = _add(api, store, "keeps its topics", [1, 0, 0, 0], topics=["a"]).json()
    response = api.patch(f"{store}/memories/{memory['id']}", json={field: None})
    assert_error(response, 422, "validation_error")
    again = api.get(f"{store}/memories/{memory['id']}").json()
    assert (again["topics"], again["versions"]) == (["a"], [])
    assert api.get(f"{store}/memories").status_code == 200


def test_a_patch_that_changes_nothing_adds_no_version(api, store):
    memory = _add(api, store, "same", [1, 0, 0, 0], importance=0.5).json()
    same = api.patch(f"{store}/memories/{memory['id']}", json={"importance": 0.5}).json()
    assert same["versions"] == []


def test_an_actor_forgotten_then_remembered_is_found_store_wide(api, store):
    _add(api, store, "likes green tea", [1, 0, 0, 0], actor="alice")
    api.post(f"{store}/memories/search", json={"query": "tea", "mode": "keyword"})  # warm
    api.delete(f"{store}/actors/alice/memories")
    _add(api, store, "drinks oolong tea", [0, 1, 0, 0], actor="alice")
    found = api.post(f"{store}/memories/search", json={"query": "tea", "mode": "keyword"}).json()
    assert [m["text"] for m in found["memories"]] == ["drinks oolong tea"]


def test_dimensions_cannot_change_under_existing_memories(api, store):
    _add(api, store, "likes tea", [1, 0, 0, 0])
    assert_error(api.put(store, json={"dimensions": 3}), 409, "conflict")
    assert api.get(store).json()["dimensions"] == DIM
    api.delete(f"{store}/actors/user-7/memories")
    assert api.put(store, json={"dimensions": 3}).status_code == 200


@pytest.mark.parametrize("query", ["   ", "\u200b", "\u2060\ufeff", "\u00ad"])
def test_blank_or_invisible_queries_are_422(api, store, query):
    assert_error(api.post(f"{store}/memories/search", json={"query": query}), 422,
                 "validation_error")  # fmt: skip
    assert_error(api.post(f"{store}/recall", json={"session_id": "s", "query": query}), 422,
                 "validation_error")  # fmt: skip
    assert_error(_add(api, store, query, [1, 0, 0, 0]), 422, "validation_error")


def test_metadata_is_measured_compact_and_must_be_finite(api, store):
    compact = {"k": "x" * (4096 - len('{"k":""}'))}
    assert _add(api, store, "fits", [1, 0, 0, 0], metadata=compact).status_code == 201
    raw = '{"text": "inf", "vector": [0, 1, 0, 0], "metadata": {"x": 1e400}}'
    response = api.post(
        f"{store}/memories", content=raw, headers={"content-type": "application/json"}
    )
    assert_error(response, 422, "validation_error")


def test_large_and_tiny_finite_vectors_are_fine(api, store):
    assert _add(api, store, "big", [1e20, 1e20, 1e20, 0]).status_code == 201
    assert _add(api, store, "tiny", [0, 0, 1e-30, 1e-30]).status_code == 201
    query = {"query": "big", "mode": "semantic", "query_vector": [1e20, 1e20, 1e20, 0]}
    hits = api.post(f"{store}/memories/search", json=query).json()
    assert hits["memories"][0]["text"] == "big" and hits["memories"][0]["score"] <= 1.0


def test_unknown_type_filter_on_listing_is_422(api, store):
    assert_error(api.get(f"{store}/memories", params={"type": "nope"}), 422, "validation_error")


def test_recall_for_another_actor_than_the_sessions_is_409(api, store):
    api.post(f"{store}/sessions/bob-chat/events",
             json={"actor_id": "bob", "events": [{"role": "user", "content": "hi"}]})  # fmt: skip
    response = api.post(f"{store}/recall", json={"session_id": "bob-chat", "actor_id": "alice"})
    assert_error(response, 409, "actor_mismatch")
