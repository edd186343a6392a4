"""Memories that change, over HTTP through the local stack: the vegetarian story with
``supersedes``, the answers that store nothing, ``include_superseded`` and ``as_of`` on search
and listing, ``GET`` with the chain, and forgetting a chain."""

from __future__ import annotations

import time

import pytest

from tests.support.common import unique
from tests.support.http import BASE, assert_error
from tests.support.stack import model_store

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


def _search(api, store, query, **fields):
    body = {"query": query, "mode": "keyword", "actor_id": "user-7", **fields}
    answer = api.post(f"{store}/memories/search", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["memories"]


def _everything(api, store):
    answer = api.get(f"{store}/memories", params={"include_superseded": "true", "limit": 100})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_vegetarian_story_over_http(api, store):
    work = _add(api, store, "The user works at Northwind Labs", [0, 0, 1, 0]).json()
    old = _add(api, store, "The user is vegetarian", [1, 0, 0, 0], topics=["diet"]).json()
    assert (old["valid_until"], old["superseded_by"], old["supersedes"]) == (None, None, None)
    assert old["valid_from"] == old["created_at"] and old["occurred_at"] is None
    time.sleep(0.01)
    between = api.get(f"{store}/memories/{old['id']}").json()["updated_at"]
    time.sleep(0.01)
    answer = _add(
        api,
        store,
        "The user started eating fish again",
        [0.9, 0.1, 0, 0],
        topics=["diet"],
        supersedes=old["id"],
        occurred_at="2026-11-30",
    )
    assert answer.status_code == 201, answer.text
    new = answer.json()
    assert new["supersedes"] == old["id"] and new["valid_until"] is None
    assert new["occurred_at"] == "2026-11-30T00:00:00Z"

    for mode, vector in (("keyword", None), ("semantic", [1, 0, 0, 0]), ("hybrid", [1, 0, 0, 0])):
        found = _search(
            api, store, "vegetarian fish diet Northwind", mode=mode, query_vector=vector
        )
        assert {m["id"] for m in found} == {new["id"], work["id"]}, mode
    listing = api.get(f"{store}/memories").json()
    assert {m["id"] for m in listing["memories"]} == {new["id"], work["id"]}
    assert listing["total"] == 2
    assert api.get(store).json()["counts"]["memories"] == 2

    everything = _everything(api, store)
    assert everything["total"] == 3
    closed = next(m for m in everything["memories"] if m["id"] == old["id"])
    assert closed["superseded_by"] == new["id"] and closed["valid_until"] == new["valid_from"]
    found = _search(api, store, "vegetarian", include_superseded=True)
    assert [m["id"] for m in found] == [old["id"]]
    then = _search(api, store, "vegetarian fish Northwind", as_of=between)
    assert {m["id"] for m in then} == {old["id"], work["id"]}
    listed_then = api.get(f"{store}/memories", params={"as_of": between}).json()
    assert {m["id"] for m in listed_then["memories"]} == {old["id"], work["id"]}

    got = api.get(f"{store}/memories/{old['id']}").json()
    assert [link["id"] for link in got["chain"]] == [old["id"], new["id"]]
    assert got["chain"][0]["valid_until"] == new["valid_from"]


def test_a_refused_supersede_answers_exactly_and_stores_nothing(api, store):
    old = _add(api, store, "Lives in Paris", [1, 0, 0, 0]).json()
    bobs = _add(api, store, "Bob lives in Rome", [0, 1, 0, 0], actor="bob").json()
    newer = _add(api, store, "Lives in Lisbon", [0, 0, 1, 0], supersedes=old["id"]).json()
    before = _everything(api, store)
    unknown = "mem_0123456789abcdef0123"
    for target, status, code, message in (
        (
            unknown,
            404,
            "memory_not_found",
            f"Memory '{unknown}', named by 'supersedes', does not exist or has expired; "
            "nothing was kept.",
        ),
        (
            bobs["id"],
            409,
            "actor_mismatch",
            f"Memory '{bobs['id']}' belongs to another actor; a memory can only supersede a "
            "memory of its own actor. Nothing was kept.",
        ),
        (
            old["id"],
            409,
            "already_superseded",
            f"Memory '{old['id']}' was already superseded by '{newer['id']}'; supersede "
            f"'{newer['id']}' instead. Nothing was kept.",
        ),
    ):
        answer = _add(api, store, "Lives in Porto", [0, 0, 0, 1], supersedes=target)
        body = assert_error(answer, status, code)
        assert body["message"] == message
        assert body["details"][0]["field"] == "supersedes"
        assert _everything(api, store) == before
    bad = _add(api, store, "Lives in Porto", [0, 0, 0, 1], supersedes="not-an-id")
    assert assert_error(bad, 422, "validation_error")["details"][0]["field"] == "supersedes"
    bad_time = api.get(f"{store}/memories", params={"as_of": "yesterday"})
    assert assert_error(bad_time, 422, "validation_error")["details"][0]["field"] == "query.as_of"
    assert _everything(api, store) == before


def test_forgetting_one_memory_of_a_chain_forgets_the_chain(api, store):
    first = _add(api, store, "one", [1, 0, 0, 0]).json()
    second = _add(api, store, "two", [0, 1, 0, 0], supersedes=first["id"]).json()
    other = _add(api, store, "other", [0, 0, 1, 0]).json()
    assert api.delete(f"{store}/memories/{first['id']}").status_code == 204
    for gone in (first, second):
        assert_error(api.get(f"{store}/memories/{gone['id']}"), 404, "memory_not_found")
    assert [m["id"] for m in _everything(api, store)["memories"]] == [other["id"]]


def _extracted(api, store, session):
    """Ask for extraction now and wait until a run has read every message of the session."""
    assert api.post(f"{store}/sessions/{session}/extract").status_code == 202
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        extraction = api.get(f"{store}/sessions/{session}").json()["extraction"]
        if extraction["unread"] == 0 and extraction["last_run_at"] is not None:
            assert extraction["last_error"] is None, extraction
            return
        time.sleep(0.2)
    raise AssertionError(f"extraction did not finish: {extraction}")


def test_the_vegetarian_story_through_extraction_over_http(open_stack, provider):
    with open_stack.client() as api:
        store = model_store(api, provider)
        try:
            for session, content in (
                ("diet-1", ["I am vegetarian.", "I work at Northwind Labs."]),
                ("diet-2", ["Yesterday I started eating fish again."]),
            ):
                events = [{"role": "user", "content": c} for c in content]
                answer = api.post(
                    f"{store}/sessions/{session}/events",
                    json={"actor_id": "user-7", "events": events},
                )
                assert answer.status_code == 200, answer.text
                _extracted(api, store, session)
            current = api.get(f"{store}/memories", params={"actor_id": "user-7"}).json()
            texts = sorted(m["text"].split(": ", 1)[1] for m in current["memories"])
            assert texts == ["I work at Northwind Labs.", "Yesterday I started eating fish again."]
            new = next(m for m in current["memories"] if "fish" in m["text"])
            assert new["supersedes"] and new["occurred_at"] is not None
            assert new["source"]["session_id"] == "diet-2" and new["source"]["seqs"] == [1]
            old = api.get(f"{store}/memories/{new['supersedes']}").json()
            assert old["text"].endswith("I am vegetarian.") and old["superseded_by"] == new["id"]
            for query in ("Am I vegetarian?", "What do I eat?"):
                body = {"query": query, "actor_id": "user-7"}
                found = api.post(f"{store}/memories/search", json=body).json()["memories"]
                assert old["id"] not in [m["id"] for m in found]
            body = {"query": "Do I eat fish?", "actor_id": "user-7", "mode": "keyword"}
            found = api.post(f"{store}/memories/search", json=body).json()["memories"]
            assert [m["id"] for m in found] == [new["id"]]
            body = {"session_id": "diet-3", "actor_id": "user-7", "query": "What do I eat?"}
            context = api.post(f"{store}/recall", json=body).json()["context"]
            assert "fish" in context and "vegetarian" not in context
        finally:
            api.delete(store)


def test_filters_over_http_on_search_listing_and_recall(api, store):
    ops = _add(
        api,
        store,
        "report on ops",
        [1, 0, 0, 0],
        topics=["Ops"],
        metadata={"team": "ops", "n": 1},
        occurred_at="2024-05-01",
    ).json()
    _add(api, store, "report on sales", [0, 1, 0, 0], topics=["sales"], metadata={"team": "x"})
    trip = _add(api, store, "report of a trip", [0, 0, 1, 0], type="episodic").json()
    for filters in (
        {"topics": ["ops"]},
        {"metadata": {"n": 1.0}},
        {"occurred_after": "2024-01-01", "occurred_before": "2024-06-01"},
    ):
        assert [m["id"] for m in _search(api, store, "report", limit=1, **filters)] == [ops["id"]]
    for params in (
        {"topics": "nothing,OPS"},
        {"metadata": '{"team":"ops"}'},
        {"occurred_after": "2024-04-30T00:00:00Z"},
    ):
        listed = api.get(f"{store}/memories", params=params)
        assert listed.status_code == 200, listed.text
        assert [m["id"] for m in listed.json()["memories"]] == [ops["id"]]
        assert listed.json()["total"] == 1
    assert api.get(f"{store}/memories", params={"include_superseded": "false"}).json()["total"] == 3
    for params, field in (
        ({"metadata": "[1]"}, "query.metadata"),
        ({"topics": ""}, "query.topics"),
        ({"include_superseded": "maybe"}, "query.include_superseded"),
        ({"created_after": "soon"}, "query.created_after"),
    ):
        body = assert_error(api.get(f"{store}/memories", params=params), 422, "validation_error")
        assert body["details"][0]["field"] == field
    body = {"session_id": "chat", "actor_id": "user-7", "query": "report", "types": ["episodic"]}
    recalled = api.post(f"{store}/recall", json=body).json()
    assert [m["id"] for m in recalled["memories"]] == [trip["id"]]
    body["types"] = ["nope"]
    refused = assert_error(api.post(f"{store}/recall", json=body), 422, "validation_error")
    assert refused["details"][0]["field"] == "types"
