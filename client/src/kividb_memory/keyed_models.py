"""Request bodies and answers of keyed memories (``/keyed-memories``), as the client sends and
reads them; the conventions of ``kividb_memory.models`` hold (it re-exports these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from kividb_memory.model_bases import Answer, Request


class KeyedMemoryPut(Request):
    """Body of ``put_keyed_memory``: ``value`` under ``(namespace, key)``; found by meaning
    through ``vectors``, or ``texts`` the store embeds, or (with neither) the value's JSON when
    the store has an embedding model; ``index=False`` keeps it out of searches by meaning;
    ``ttl_seconds`` (default: the store's ``memory_ttl_seconds``)."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    texts: list[str] | None = None
    vectors: list[list[float]] | None = Field(None, strict=False)
    index: bool | None = None
    ttl_seconds: float | None = Field(None, strict=False)


class KeyedSearchRequest(Request):
    """Body of ``search_keyed_memories``: under ``namespace_prefix``, matching ``filter`` (a
    dotted path to a JSON value, or to ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``),
    by meaning with ``query`` or ``query_vector``, else newest first."""

    namespace_prefix: list[str] | None = None
    filter: dict[str, Any] | None = None
    query: str | None = None
    query_vector: list[float] | None = Field(None, strict=False)
    limit: int | None = None
    offset: int | None = None
    refresh_ttl: bool | None = None


class NamespacesRequest(Request):
    """Body of ``list_keyed_namespaces``: ``prefix`` / ``suffix`` of whole labels (``*`` any
    one), ``max_depth``, ``limit``, ``offset``."""

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = None
    limit: int | None = None
    offset: int | None = None


class KeyedMemoryView(Answer):
    """A keyed memory; ``score`` (0 to 1) and ``similarity`` (the cosine, -1 to 1) only in a
    search by meaning."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    score: float | None = None
    similarity: float | None = None


class KeyedSearchResult(Answer):
    """Answer of ``search_keyed_memories``: best (or newest) first; ``items_omitted`` of the
    page's ``limit`` were left out to keep the answer under its byte budget, and
    ``next_offset`` (the ``offset`` of the next page) is None when no match is left."""

    items: list[KeyedMemoryView]
    items_omitted: int = 0
    next_offset: int | None = None


class NamespaceList(Answer):
    """Answer of ``list_keyed_namespaces``; ``next_offset`` (the ``offset`` of the next page)
    is None on the last."""

    namespaces: list[list[str]]
    next_offset: int | None = None
