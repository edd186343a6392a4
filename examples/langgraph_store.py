"""A LangGraph graph whose long-term store is a KiviDB store's keyed memories.

Run against the local stack (`make run`, then in another shell):

    KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
    KIVIDB_INSTANCE=local KIVIDB_STORE=examples .venv/bin/python examples/langgraph_store.py

One node remembers what the user says their favourite colour is, under a namespace of that
user; a second run of the graph finds it again. No model is needed: nodes
read and write the store LangGraph hands them. The store is created if it is missing.
"""

from __future__ import annotations

import os
from typing import NotRequired, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from kividb_memory import MemoryClient
from kividb_memory.integrations.langgraph import KiviDBStore


class State(TypedDict):
    """The graph's state: who speaks, what they said, and the node's answer."""

    user: str
    said: str
    answer: NotRequired[str]


def remember(state: State, *, store: BaseStore) -> dict[str, str]:
    """Keep a colour the user names; answer with the one remembered."""
    namespace = ("users", state["user"], "preferences")
    if state["said"].startswith("My favourite colour is "):
        colour = state["said"].removeprefix("My favourite colour is ").rstrip(".")
        store.put(namespace, "colour", {"colour": colour})
        return {"answer": f"I will remember {colour}."}
    found = store.search(namespace, filter={"colour": {"$ne": None}})
    return {"answer": f"Your favourite colour is {found[0].value['colour']}." if found else "?"}


def main() -> None:
    """Two runs of a one-node graph on the store ``KIVIDB_INSTANCE`` / ``KIVIDB_STORE``."""
    instance, name = os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"]
    with MemoryClient() as client:
        client.put_store(instance, name)
        store = KiviDBStore(client.store(instance, name))
        builder = StateGraph(State)
        builder.add_node("remember", remember)
        builder.add_edge(START, "remember")
        builder.add_edge("remember", END)
        graph = builder.compile(store=store)
        first: State = {"user": "ann", "said": "My favourite colour is teal."}
        again: State = {"user": "ann", "said": "What is my favourite colour?"}
        print(graph.invoke(first)["answer"])
        print(graph.invoke(again)["answer"])
        print(f"namespaces: {store.list_namespaces(prefix=('users',))}")


if __name__ == "__main__":
    main()
