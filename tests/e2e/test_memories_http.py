"""Long-term memory over HTTP through the local stack: add with a vector, find it again with
each mode, change, forget, and recall with memories."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kividb_memory import ConflictError, NotFoundError, StoreClient, ValidationError
from tests.support.common import unique
from tests.support.http import BASE, assert_error

DIM = 4


@pytest.fixture
def store(api):
    name = unique("store")
    assert api.put(f"{BASE}/{name}", json={"dimensions": DIM}).status_code == 201
    yield f"{BASE}/{name}"
    api.delete(f"{BASE}/{name}")


@pytest.fixture
def memories(memory, store) -> StoreClient:
    """The same store through the Python client (the flows below); the tests after them send
    raw bodies (nulls, numbers JSON cannot hold) and check exact answers, so they use httpx."""
    return memory.store("local", store.rsplit("/", 1)[1])


def _add(api, store, text, vector, actor="user-7", **fields):
    return api.post(
        f"{store}/memories", json={"text": text, "vector": vector, "actor_id": actor, **fields}
    )


def test_add_then_find_with_each_mode(memory, memories):
    added = memories.add_memory(
        "The user deploys to eu-west-1", "user-7", vector=[1, 0, 0, 0], topics=["infra"]
    )
    assert added.duplicate is False and added.id.startswith("mem_")
    memories.add_memory("The user likes green tea", "user-7", vector=[0, 1, 0, 0])
    for mode, vector in (
        ("semantic", [0.9, 0.1, 0, 0]),
        ("keyword", None),
        ("hybrid", [0.9, 0.1, 0, 0]),
    ):
        hits = memories.search(
            "deploy region eu-west-1", mode=mode, actor_id="user-7", query_vector=vector
        ).memories
        assert hits[0].id == added.id and hits[0].score is not None
    counts = memory.get_store("local", memories.name).counts
    assert counts is not None and counts.memories == 2


def test_duplicates_answer_the_kept_memory(memories):
    first = memories.add_memory("Likes tea", "user-7", vector=[0, 0, 1, 0])
    again = memories.add_memory("Likes tea a lot", "user-7", vector=[0, 0, 1, 0])  # 200, not 201
    assert again.duplicate is True and again.id == first.id


def test_bad_memories_are_422_and_keep_nothing(memory, memories):
    def refused(code: str, text: str, vector, **fields) -> ValidationError:
        with pytest.raises(ValidationError) as raised:
            memories.add_memory(text, "user-7", vector=vector, **fields)
        assert (raised.value.status, raised.value.code) == (422, code)
        return raised.value

    assert "expected 4 dimensions, got 2" in refused("vector_invalid", "x", [1, 0]).message
    refused("vector_required", "x", None)
    assert (
        "semantic, episodic" in refused("validation_error", "x", [1, 0, 0, 0], type="fact").message
    )
    refused("validation_error", "", [1, 0, 0, 0])
    refused("validation_error", "x" * 8001, [1, 0, 0, 0])
    with pytest.raises(ValidationError):
        memories.add_memory("x", vector=[1, 0, 0, 0], importance=1.5)
    with pytest.raises(ValidationError):
        memories.search("   ", mode="keyword")
    counts = memory.get_store("local", memories.name).counts
    assert counts is not None and counts.memories == 0


def test_change_shows_versions_and_forget_removes(memories):
    kept = memories.add_memory("Lives in Paris", "user-7", vector=[1, 0, 0, 0])
    changed = memories.update_memory(kept.id, text="Lives in Lisbon", vector=[0, 1, 0, 0])
    assert changed.text == "Lives in Lisbon"
    assert [v.text for v in changed.versions or []] == ["Lives in Paris"]
    versions = memories.get_memory(kept.id).versions
    assert versions is not None and versions[0].text == "Lives in Paris"
    assert memories.delete_memory(kept.id) is None  # 204
    with pytest.raises(NotFoundError) as missing:
        memories.get_memory(kept.id)
    assert missing.value.code == "memory_not_found"
    with pytest.raises(ValidationError):
        memories.get_memory("not-an-id")


def test_forget_an_actor_in_one_call(memories):
    memories.add_memory("a", "user-7", vector=[1, 0, 0, 0])
    memories.add_memory("b", "user-7", vector=[0, 1, 0, 0])
    memories.add_memory("c", "someone-else", vector=[0, 0, 1, 0])
    forgotten = memories.forget_actor("user-7")
    assert forgotten.model_dump() == {
        "actor_id": "user-7",
        "deleted": 2,
        "profile_fields_deleted": 0,
    }
    assert [m.text for m in memories.list_memories().memories] == ["c"]


def test_listing_filters_by_actor_and_type(memories):
    memories.add_memory("went hiking on 3 May", "user-7", type="episodic", vector=[1, 0, 0, 0])
    memories.add_memory("likes hiking", "user-7", vector=[0, 1, 0, 0])
    memories.add_memory("other", "x", vector=[0, 0, 1, 0])
    episodic = memories.list_memories(type="episodic").memories
    assert [m.text for m in episodic] == ["went hiking on 3 May"]
    mine = memories.list_memories(actor_id="user-7", limit=1)
    assert [m.text for m in mine.memories] == ["likes hiking"] and mine.next_offset == 1
    assert mine.total == 2  # both of user-7's, over every page
    assert memories.list_memories().total == 3


def test_recall_brings_the_relevant_memories_of_the_sessions_actor(memories):
    memories.add_memory("Deploys to eu-west-1 on Fridays", "user-7", vector=[1, 0, 0, 0])
    memories.add_memory("Went to Lisbon in May", "user-7", type="episodic", vector=[0, 1, 0, 0])
    memories.add_memory("Someone else deploys to us-east-1", "other", vector=[1, 0, 0, 0])
    memories.add_events("chat", [{"role": "user", "content": "When do we deploy?"}], "user-7")
    recalled = memories.recall("chat", query_vector=[1, 0, 0, 0])
    texts = [m.text for m in recalled.memories]
    assert texts[0] == "Deploys to eu-west-1 on Fridays"
    assert "Someone else deploys to us-east-1" not in texts
    assert "## Long-term memories about the user" in recalled.context
    assert '- [semantic] "Deploys to eu-west-1 on Fridays"' in recalled.context
    assert memories.recall("new", query="deploy").memories == []
    assert len(memories.recall("chat", limit=1, query="deploy Lisbon").memories) == 1


def test_recall_for_another_actor_than_the_sessions_is_409(memories):
    memories.add_events("bob-chat", [{"role": "user", "content": "hi"}], actor_id="bob")
    with pytest.raises(ConflictError) as refused:
        memories.recall("bob-chat", actor_id="alice")
    assert refused.value.code == "actor_mismatch"


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
    assert_error(
        api.post(f"{store}/memories/search", json={"query": query}), 422, "validation_error"
    )
    assert_error(
        api.post(f"{store}/recall", json={"session_id": "s", "query": query}),
        422,
        "validation_error",
    )
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


def test_a_memory_that_supersedes_another_hides_it_unless_asked(memories):
    old = memories.add_memory("Lives in Paris", "user-7", vector=[1, 0, 0, 0])
    new = memories.add_memory(
        "Lives in Lisbon",
        "user-7",
        vector=[0, 1, 0, 0],
        supersedes=old.id,
        occurred_at="2026-03-01T00:00:00Z",
    )
    assert new.supersedes == old.id and new.valid_until is None
    assert [m.id for m in memories.list_memories().memories] == [new.id]
    listed = memories.list_memories(include_superseded=True).memories
    assert {m.id for m in listed} == {old.id, new.id}
    before = memories.list_memories(as_of=new.valid_from - timedelta(microseconds=1000))
    assert [m.id for m in before.memories] == [old.id]
    found = memories.search("Lives", mode="keyword", include_superseded=True).memories
    assert {m.id for m in found} == {old.id, new.id}
    chain = memories.get_memory(new.id).chain or []
    assert [link.id for link in chain] == [old.id, new.id]


def test_the_clients_filters_reach_the_listing_search_and_recall(memories):
    ops = memories.add_memory(
        "Pages the on-call",
        "user-7",
        vector=[1, 0, 0, 0],
        topics=["On-Call"],
        metadata={"team": "ops", "level": 2},
    )
    memories.add_memory("Likes tea", "user-7", vector=[0, 1, 0, 0], metadata={"team": "dev"})
    listed = memories.list_memories(topics=["on-call", "x"], metadata={"team": "ops"})
    assert [m.id for m in listed.memories] == [ops.id]
    assert memories.list_memories(metadata={"team": "ops", "level": 3}).memories == []
    after = memories.list_memories(created_after=ops.created_at).memories
    assert ops.id in [m.id for m in after]
    assert memories.list_memories(created_before=ops.created_at).memories == []
    found = memories.search("tea on-call", mode="keyword", metadata={"team": "dev"}).memories
    assert [m.text for m in found] == ["Likes tea"]
    memories.add_events("chat", [{"role": "user", "content": "on-call?"}], "user-7")
    recalled = memories.recall("chat", query_vector=[1, 0, 0, 0], types=["episodic"])
    assert recalled.memories == []


def test_a_custom_type_memories_use_cannot_be_removed(api, store):
    types = [{"name": n, "description": f"about {n}"} for n in ("recipe", "order_issue", "unused")]
    assert api.put(store, json={"custom_types": types}).status_code == 200
    kept = [
        _add(api, store, f"recipe {i}", [1, 0, i, 0], actor=a, type="recipe").json()
        for i, a in enumerate(("alice", "bob"))
    ]
    issue = _add(api, store, "late parcel", [0, 1, 0, 0], type="order_issue").json()
    changed = api.patch(f"{store}/memories/{issue['id']}", json={"type": "semantic"})
    assert changed.status_code == 200

    refused = assert_error(api.put(store, json={"custom_types": []}), 409, "conflict")
    message = refused["message"]
    assert "3 memories" in message and "'order_issue' (1), 'recipe' (2)" in message
    assert refused["details"] == [
        {"field": "custom_types", "problem": "1 memories use the type 'order_issue'"},
        {"field": "custom_types", "problem": "2 memories use the type 'recipe'"},
    ]
    assert [t["name"] for t in api.get(store).json()["custom_types"]] == [
        "recipe",
        "order_issue",
        "unused",
    ]
    listed = api.get(f"{store}/memories", params={"type": "recipe"}).json()["memories"]
    assert sorted(m["id"] for m in listed) == sorted(m["id"] for m in kept)

    assert api.put(store, json={"custom_types": types[:2]}).status_code == 200  # unused: fine
    for memory in kept:
        assert api.delete(f"{store}/memories/{memory['id']}").status_code == 204
    assert api.put(store, json={"custom_types": types[1:2]}).status_code == 200  # recipe: gone
    assert_error(api.put(store, json={"custom_types": []}), 409, "conflict")  # still in history
