"""The use cases of keyed memories: a value under a caller's ``(namespace, key)``, kept, read,
forgotten, searched, and the namespaces listed. A key limited to actors may not use them:
a namespace is the whole store's (``reach.whole_store``)."""

from __future__ import annotations

from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.keyed.models import (
    KeyedMemoryPut,
    KeyedMemoryView,
    KeyedSearchRequest,
    KeyedSearchResult,
    NamespaceList,
    NamespacesRequest,
)


def put_keyed(store: StoreHandle, body: KeyedMemoryPut) -> KeyedMemoryView:
    """Keep ``body.value`` under its namespace and key in one atomic step (an upsert)."""
    reach.whole_store(store, "keep keyed memories")
    return store.keyed.put(body)


def keyed_view(
    store: StoreHandle, namespace: list[str], key: str, refresh_ttl: bool = False
) -> KeyedMemoryView:
    """The keyed memory under ``namespace`` and ``key``; with ``refresh_ttl`` its expiry
    starts again from now, which a read-only key may not ask (``Forbidden``)."""
    reach.whole_store(store, "read keyed memories")
    if refresh_ttl:
        reach.writes(store, "refresh_ttl")
    return store.keyed.get(namespace, key, refresh_ttl)


def delete_keyed(store: StoreHandle, namespace: list[str], key: str) -> None:
    """Forget the keyed memory under ``namespace`` and ``key``; ``KeyedMemoryNotFound``."""
    reach.whole_store(store, "forget keyed memories")
    store.keyed.delete(namespace, key)


def keyed_search(store: StoreHandle, request: KeyedSearchRequest) -> KeyedSearchResult:
    """Keyed memories under ``namespace_prefix`` matching ``filter``, within the answer's byte
    budget; ``refresh_ttl`` is a write a read-only key may not ask (``Forbidden``)."""
    reach.whole_store(store, "search keyed memories")
    if request.refresh_ttl:
        reach.writes(store, "refresh_ttl")
    return store.keyed.search(request, store.container.answer_budget_bytes)


def keyed_namespaces(store: StoreHandle, request: NamespacesRequest) -> NamespaceList:
    """The namespaces that hold keyed memories (``KeyedMemories.namespaces``), within the
    answer's byte budget."""
    reach.whole_store(store, "list keyed namespaces")
    return store.keyed.namespaces(request, store.container.answer_budget_bytes)
