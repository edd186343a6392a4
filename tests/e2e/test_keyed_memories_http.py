"""Keyed memories over HTTP and through the client and ``KiviDBStore``: labels of any
character travel in the query string, bad input is a 422 naming the field and changes nothing,
a missing memory is 404, and LangGraph's TTL settings map onto the store's expiry."""

from __future__ import annotations

import time

import pytest
from langgraph.store.base import InvalidNamespaceError

from kividb_memory import NotFoundError, ValidationError
from kividb_memory.integrations.langgraph import KiviDBStore

HOSTILE = ["a b", "ü/ß?&=#%", "line\nbreak", "'; DROP", "*", "{tag}", "\t"]


def test_labels_and_keys_of_any_character_round_trip(memory_store):
    for i, label in enumerate(HOSTILE):
        memory_store.put_keyed_memory(["u", label], f"k?{label}", {"i": i})
    for i, label in enumerate(HOSTILE):
        got = memory_store.get_keyed_memory(["u", label], f"k?{label}")
        assert (got.namespace, got.key, got.value) == (["u", label], f"k?{label}", {"i": i})
    listed = memory_store.list_keyed_namespaces(prefix=["u"], limit=100).namespaces
    assert sorted(listed) == sorted(["u", label] for label in HOSTILE)


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": [], "key": "k", "value": {}},
        {"namespace": ["a.b"], "key": "k", "value": {}},
        {"namespace": [""], "key": "k", "value": {}},
        {"namespace": ["a"], "key": "", "value": {}},
        {"namespace": ["a"], "key": "k" * 1025, "value": {}},
        {"namespace": ["a"], "key": "k", "value": [1]},
        {"namespace": ["a"], "key": "k", "value": "text"},
        {"namespace": ["a"], "key": "k", "value": {"x": "y" * 70_000}},
        {"namespace": ["a"], "key": "k", "value": {}, "vectors": [[1, 0]]},
        {"namespace": ["a"], "key": "k", "value": {}, "texts": ["t"], "vectors": [[1, 0, 0]]},
        {"namespace": ["a"], "key": "k", "value": {}, "texts": ["t"]},  # no embedding model
        {"namespace": ["a"], "key": "k", "value": {}, "ttl_seconds": 0},
        {"namespace": ["a"], "key": "k", "value": {}, "extra": 1},
        {"namespace": ["a"], "key": "k", "value": {}, "index": False, "vectors": [[1, 0, 0]]},
        {"namespace": ["a"] * 21, "key": "k", "value": {}},
        {"namespace": ["a" * 257], "key": "k", "value": {}},
        {"namespace": ["a"], "key": "k", "value": {}, "vectors": [[1, 0, 0]] * 33},
    ],
)
def test_a_bad_put_is_422_and_changes_nothing(api, store, body):
    before = api.put(
        f"{store}/keyed-memories", json={"namespace": ["a"], "key": "k", "value": {"v": 1}}
    )
    assert before.status_code == 200, before.text
    answer = api.put(f"{store}/keyed-memories", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["details"]
    got = api.get(f"{store}/keyed-memories", params={"namespace": "a", "key": "k"})
    assert got.json()["value"] == {"v": 1}


def test_a_missing_memory_is_404_and_a_bad_namespace_parameter_422(memory_store):
    with pytest.raises(NotFoundError) as missing:
        memory_store.get_keyed_memory(["nobody"], "k")
    assert missing.value.code == "keyed_memory_not_found"
    with pytest.raises(NotFoundError):
        memory_store.delete_keyed_memory(["nobody"], "k")
    with pytest.raises(ValueError):
        memory_store.get_keyed_memory(["a.b"], "k")  # the client refuses what it cannot send


def test_the_namespace_query_parameter_refuses_an_empty_label(api, store):
    answer = api.get(f"{store}/keyed-memories", params={"namespace": "a..b", "key": "k"})
    assert answer.status_code == 422
    assert answer.json()["details"][0]["field"] == "query.namespace"


def test_langgraph_ttl_in_minutes_expires_items_and_refresh_on_read_keeps_them(memory_store):
    store = KiviDBStore(memory_store, ttl={"default_ttl": 2 / 60, "refresh_on_read": True})
    store.put(("ttl",), "read", {"v": 1})
    store.put(("ttl",), "unread", {"v": 2})
    for _ in range(3):
        time.sleep(0.8)
        assert store.get(("ttl",), "read") is not None  # each read starts its 2 s again
    assert store.get(("ttl",), "unread", refresh_ttl=False) is None
    assert [i.key for i in store.search(("ttl",))] == ["read"]


def test_langgraph_errors_are_its_own_and_nothing_runs(memory_store):
    store = KiviDBStore(memory_store)
    store.put(("ok",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("bad.label",), "k", {"v": 2})
    with pytest.raises(ValueError, match="Invalid filter key"):
        store.search(("ok",), filter={"a..b": 1})
    with pytest.raises(ValidationError):
        store.put(("ok",), "k", {"v": "x" * 70_000})
    assert store.get(("ok",), "k").value == {"v": 1}
    assert store.search(("ok",), filter={"v": {"$eq": float("nan")}}) == []
    assert len(store.search(("ok",), filter={"v": {"$lt": float("inf")}})) == 1


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("search", {"limit": 0}, "limit"),
        ("search", {"offset": 10_001}, "offset"),
        ("search", {"namespace_prefix": ["a.b"]}, "namespace_prefix.0"),
        ("search", {"query_vector": [1, 0]}, "query_vector"),
        ("search", {"query": "no embedding model here"}, "query_vector"),
        ("search", {"filter": {"v": {"$in": [1]}}}, "filter.v"),
        ("namespaces", {"max_depth": 0}, "max_depth"),
        ("namespaces", {"limit": 1001}, "limit"),
        ("namespaces", {"prefix": [""]}, "prefix.0"),
        ("namespaces", {"depth": 1}, "depth"),
    ],
)
def test_a_bad_search_or_listing_is_422_naming_the_field(api, store, route, body, field):
    answer = api.post(f"{store}/keyed-memories/{route}", json=body)
    assert answer.status_code == 422, answer.text
    assert field in [d["field"] for d in answer.json()["details"]]
