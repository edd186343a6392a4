"""LangMem's memory tools (``create_manage_memory_tool``, ``create_search_memory_tool``) run on
``KiviDBStore``: on a store whose embedding model embeds each memory (the scripted provider),
the search tool finds by meaning; on one without, the query is ignored as LangGraph's stores
ignore it without an index, and the tools still create, update, find and delete."""

from __future__ import annotations

import json

from langmem import create_manage_memory_tool, create_search_memory_tool

from kividb_memory.integrations.langgraph import KiviDBStore
from tests.support.stack import model_store

CONFIG = {"configurable": {"user_id": "ann"}}
NAMESPACE = ("memories", "{user_id}")


def _tools(store: KiviDBStore):
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    return manage, search


def _found(search, query: str) -> list[dict]:
    return json.loads(search.invoke({"query": query}, config=CONFIG))


def test_langmem_tools_keep_and_find_by_meaning_on_a_store_with_an_embedding_model(
    memory, provider
):
    name = model_store(memory, provider).rsplit("/", 1)[1]
    try:
        store = KiviDBStore(memory.store("local", name))
        manage, search = _tools(store)
        for content in (
            "Ann prefers dark mode in every editor",
            "Ann's cat is called Miso",
            "Ann deploys to eu-west-1 on Fridays",
        ):
            assert manage.invoke({"content": content, "action": "create"}, config=CONFIG)
        found = _found(search, "which region does Ann deploy to")
        assert found[0]["value"]["content"] == "Ann deploys to eu-west-1 on Fridays"
        assert found[0]["score"] is not None and found[0]["score"] >= found[-1]["score"]
        key = found[0]["key"]
        manage.invoke(
            {"content": "Ann deploys to eu-central-1 on Fridays", "action": "update", "id": key},
            config=CONFIG,
        )
        assert store.get(("memories", "ann"), key).value == {
            "content": "Ann deploys to eu-central-1 on Fridays"
        }
        manage.invoke({"action": "delete", "id": key}, config=CONFIG)
        assert store.get(("memories", "ann"), key) is None
        assert len(store.search(("memories", "ann"))) == 2
        assert store.search(("memories", "bob")) == []  # another user's namespace
    finally:
        memory.delete_store("local", name)


def test_langmem_tools_work_on_a_store_without_an_embedding_model(memory_store):
    store = KiviDBStore(memory_store)
    manage, search = _tools(store)
    manage.invoke({"content": "Ann prefers tea", "action": "create"}, config=CONFIG)
    manage.invoke({"content": "Ann lives in Lyon", "action": "create"}, config=CONFIG)
    found = _found(search, "drinks")  # no model: newest first, the query ignored
    assert [f["value"]["content"] for f in found] == ["Ann lives in Lyon", "Ann prefers tea"]
    assert all(f["score"] is None for f in found)
