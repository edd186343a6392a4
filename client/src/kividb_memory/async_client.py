"""``AsyncMemoryClient`` and its store handle ``AsyncStoreClient``: the same methods as the
synchronous ``kividb_memory.client.MemoryClient`` and ``StoreClient``, awaited, over an
``httpx.AsyncClient``.

::

    from kividb_memory import AsyncMemoryClient

    async with AsyncMemoryClient() as client:  # KIVIDB_API_URL and KIVIDB_API_KEY
        store = client.store("local", "support-agent")
        memory = await store.recall("chat-1", query="When do we deploy?", actor_id="user-7")

Separate from ``client`` so that each module holds one way of sending; the request bodies are
built by the same helpers (``client``'s), so the two clients send the same requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, overload

import httpx

from kividb_memory import _http
from kividb_memory import models as m
from kividb_memory.client import (
    UNSET,
    T,
    When,
    _Base,
    _batch,
    _filters,
    _memory,
    _patch,
    _search,
    _session_import,
)


class AsyncMemoryClient(_Base):
    """The asynchronous client: the same methods as :class:`MemoryClient`, awaited. Use it as
    ``async with AsyncMemoryClient() as client:`` or close it with ``await client.aclose()``;
    ``http_client`` is an ``httpx.AsyncClient`` of your own."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = _http.DEFAULT_MAX_RETRIES,
        max_retry_wait: float = _http.DEFAULT_MAX_RETRY_WAIT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, max_retries, max_retry_wait)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    async def aclose(self) -> None:
        """Close the connection pool (not an ``http_client`` that was passed in)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def send(self, call: _http.Call[T]) -> T | None:
        """Send one request with the retry rule of ``_http.retry_wait``; its answer's model."""
        url = self._config.base_url + call.path
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    call.method,
                    url,
                    params=dict(call.params) or None,
                    json=call.body,
                    headers=_http.headers(self._config),
                    timeout=self._timeout,
                )
            except httpx.TransportError as exc:
                wait = _http.retry_wait(call, attempt, self._config, failure=exc)
                if wait is None:
                    raise _http.connection_error(call, url, exc) from exc
                await asyncio.sleep(wait)
                continue
            if response.status_code in _http.RETRY_STATUSES:
                retry_after = _http.retry_after_seconds(response.headers.get("retry-after"))
                status = response.status_code
                wait = _http.retry_wait(
                    call, attempt, self._config, status=status, retry_after=retry_after
                )
                if wait is not None:
                    await asyncio.sleep(wait)
                    continue
            return _http.read_answer(call, response)

    async def _answer(self, call: _http.Call[T]) -> T:
        answer = await self.send(call)
        assert answer is not None
        return answer

    @overload
    async def list_stores(self, instance_id: None = None) -> m.OrganizationStoreList: ...
    @overload
    async def list_stores(self, instance_id: str) -> m.StoreList: ...
    async def list_stores(self, instance_id: str | None = None) -> m.StoreList:
        """As :meth:`MemoryClient.list_stores`."""
        if instance_id is None:
            return await self._answer(_http.list_organization_stores())
        return await self._answer(_http.list_instance_stores(instance_id))

    async def put_store(self, instance_id: str, name: str, **settings: Any) -> m.StoreView:
        """As :meth:`MemoryClient.put_store`."""
        return await self._answer(_http.put_store(instance_id, name, settings))

    async def get_store(self, instance_id: str, name: str) -> m.StoreView:
        """As :meth:`MemoryClient.get_store`."""
        return await self._answer(_http.get_store(instance_id, name))

    async def delete_store(self, instance_id: str, name: str) -> None:
        """As :meth:`MemoryClient.delete_store`."""
        await self.send(_http.delete_store(instance_id, name))

    def store(self, instance_id: str, name: str) -> AsyncStoreClient:
        """A handle on one store, sharing this client's connection pool."""
        return AsyncStoreClient(self, instance_id, name)


class AsyncStoreClient:
    """The routes of one store, awaited (``async_client.store(instance_id, name)``); each
    method as its :class:`StoreClient` twin."""

    def __init__(self, client: AsyncMemoryClient, instance_id: str, name: str) -> None:
        self._client = client
        self._prefix = _http.store_prefix(instance_id, name)
        self.instance_id = instance_id
        self.name = name

    def __repr__(self) -> str:
        return f"AsyncStoreClient(instance_id={self.instance_id!r}, name={self.name!r})"

    async def add_events(
        self,
        session_id: str,
        events: Sequence[m.EventIn | Mapping[str, Any]],
        actor_id: str | None = None,
    ) -> m.EventsResult:
        """As :meth:`StoreClient.add_events`."""
        call = _http.add_events(self._prefix, session_id, events, actor_id)
        return await self._client._answer(call)

    async def recall(
        self,
        session_id: str,
        query: str | None = None,
        actor_id: str | None = None,
        limit: int | None = None,
        query_vector: Sequence[float] | None = None,
        *,
        types: Sequence[str] | None = None,
    ) -> m.RecallView:
        """As :meth:`StoreClient.recall`."""
        call = _http.recall(self._prefix, session_id, query, actor_id, limit, query_vector, types)
        return await self._client._answer(call)

    async def list_sessions(
        self, offset: int | None = None, limit: int | None = None
    ) -> m.SessionList:
        """As :meth:`StoreClient.list_sessions`."""
        return await self._client._answer(_http.list_sessions(self._prefix, offset, limit))

    async def get_session(self, session_id: str, recent: int | None = None) -> m.SessionView:
        """As :meth:`StoreClient.get_session`."""
        return await self._client._answer(_http.get_session(self._prefix, session_id, recent))

    async def delete_session(self, session_id: str) -> None:
        """As :meth:`StoreClient.delete_session`."""
        await self._client.send(_http.delete_session(self._prefix, session_id))

    async def extract(self, session_id: str) -> m.ExtractionQueued:
        """As :meth:`StoreClient.extract`."""
        return await self._client._answer(_http.extract(self._prefix, session_id))

    async def add_memory(
        self,
        text: str,
        actor_id: str | None = None,
        type: str | None = None,
        topics: Sequence[str] | None = None,
        vector: Sequence[float] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        supersedes: str | None = None,
        occurred_at: datetime | str | None = None,
    ) -> m.MemoryView:
        """As :meth:`StoreClient.add_memory`."""
        memory = _memory(
            text, actor_id, type, topics, vector, metadata, importance, confidence,
            supersedes, occurred_at,
        )  # fmt: skip
        return await self._client._answer(_http.add_memory(self._prefix, memory))

    async def list_memories(
        self,
        offset: int | None = None,
        limit: int | None = None,
        actor_id: str | None = None,
        type: str | None = None,
        *,
        include_superseded: bool | None = None,
        as_of: When = None,
        topics: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_after: When = None,
        created_before: When = None,
        occurred_after: When = None,
        occurred_before: When = None,
    ) -> m.MemoryList:
        """As :meth:`StoreClient.list_memories`."""
        filters = _filters(
            include_superseded=include_superseded,
            as_of=as_of,
            topics=topics,
            metadata=metadata,
            created_after=created_after,
            created_before=created_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        call = _http.list_memories(self._prefix, offset, limit, actor_id, type, filters)
        return await self._client._answer(call)

    async def get_memory(self, memory_id: str) -> m.MemoryView:
        """As :meth:`StoreClient.get_memory`."""
        return await self._client._answer(_http.get_memory(self._prefix, memory_id))

    async def update_memory(
        self,
        memory_id: str,
        *,
        text: str = UNSET,
        type: str = UNSET,
        topics: Sequence[str] = UNSET,
        metadata: Mapping[str, Any] = UNSET,
        importance: float | None = UNSET,
        vector: Sequence[float] = UNSET,
    ) -> m.MemoryView:
        """As :meth:`StoreClient.update_memory`."""
        patch = _patch(
            text=text,
            type=type,
            topics=list(topics) if topics is not UNSET else UNSET,
            metadata=dict(metadata) if metadata is not UNSET else UNSET,
            importance=importance,
            vector=list(vector) if vector is not UNSET else UNSET,
        )
        return await self._client._answer(_http.update_memory(self._prefix, memory_id, patch))

    async def delete_memory(self, memory_id: str) -> None:
        """As :meth:`StoreClient.delete_memory`."""
        await self._client.send(_http.delete_memory(self._prefix, memory_id))

    async def search(
        self,
        query: str,
        mode: m.SearchMode = "hybrid",
        actor_id: str | None = None,
        types: Sequence[str] | None = None,
        limit: int | None = None,
        query_vector: Sequence[float] | None = None,
        *,
        include_superseded: bool | None = None,
        as_of: When = None,
        topics: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_after: When = None,
        created_before: When = None,
        occurred_after: When = None,
        occurred_before: When = None,
    ) -> m.SearchResult:
        """As :meth:`StoreClient.search`."""
        filters = _filters(
            include_superseded=include_superseded,
            as_of=as_of,
            topics=topics,
            metadata=metadata,
            created_after=created_after,
            created_before=created_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        request = _search(query, mode, actor_id, types, limit, query_vector, filters)
        return await self._client._answer(_http.search(self._prefix, request))

    async def forget_actor(self, actor_id: str) -> m.ActorForgotten:
        """As :meth:`StoreClient.forget_actor`."""
        return await self._client._answer(_http.forget_actor(self._prefix, actor_id))

    async def export_session_ids(
        self, cursor: str | None = None, limit: int | None = None
    ) -> m.SessionIdPage:
        """As :meth:`StoreClient.export_session_ids`."""
        call = _http.export_session_ids(self._prefix, cursor, limit)
        return await self._client._answer(call)

    async def export_session(
        self, session_id: str, after_seq: int | None = None, limit: int | None = None
    ) -> m.SessionExport:
        """As :meth:`StoreClient.export_session`."""
        call = _http.export_session(self._prefix, session_id, after_seq, limit)
        return await self._client._answer(call)

    async def import_session(
        self, session_id: str, session: m.SessionImport | Mapping[str, Any]
    ) -> m.SessionImported:
        """As :meth:`StoreClient.import_session`."""
        body = session if isinstance(session, m.SessionImport) else _session_import(session)
        return await self._client._answer(_http.import_session(self._prefix, session_id, body))

    async def export_memories(
        self, cursor: str | None = None, limit: int | None = None
    ) -> m.MemoryExportPage:
        """As :meth:`StoreClient.export_memories`."""
        call = _http.export_memories(self._prefix, cursor, limit)
        return await self._client._answer(call)

    async def import_memories(
        self, memories: Sequence[m.ImportedMemory | Mapping[str, Any]]
    ) -> m.MemoryImportResult:
        """As :meth:`StoreClient.import_memories`."""
        call = _http.import_memories(self._prefix, _batch(memories))
        return await self._client._answer(call)
