"""``AsyncMemoryClient`` (asynchronous) and its store handle ``AsyncStoreClient``.

::

    from kividb_memory import AsyncMemoryClient

    async with AsyncMemoryClient() as client:  # KIVIDB_API_URL and KIVIDB_API_KEY
        store = client.store("local", "support-agent")
        memory = await store.recall("chat-1", query="When do we deploy?", actor_id="user-7")
        await store.add_events("chat-1", [{"role": "user", "content": "..."}], actor_id="user-7")

One client holds one connection pool (an ``httpx.AsyncClient``) for every store handle made
from it; close it with ``await client.aclose()`` or an ``async with`` block. Every method sends
one request (more when it is retried, see ``kividb_memory._http.retry_wait``) and returns the
answer's model, or raises a :mod:`kividb_memory.errors` exception. The request bodies are built
by ``_base``'s helpers.

This module is the source of the synchronous client: ``client.py`` is generated from it by
``python -m tools.unasync_client`` (``make lint`` checks that it is up to date).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, Literal, overload

import httpx

from kividb_memory import _consolidation_calls as _con, _http, models as m
from kividb_memory._base import (
    UNSET as UNSET,  # re-exported: update_memory's default, kividb_memory.client.UNSET
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
    """The asynchronous client.

    ``base_url`` and ``api_key`` default to ``KIVIDB_API_URL`` and ``KIVIDB_API_KEY``
    (``ValueError`` when neither gives one). ``timeout``: seconds (or an ``httpx.Timeout``) per
    attempt, default 30 s to read and 5 s to connect. ``max_retries`` (default 2) and
    ``max_retry_wait`` (default 20 s, the longest ``Retry-After`` honoured) bound the retries.
    ``http_client``: an ``httpx.AsyncClient`` of your own (proxies, certificates, transports);
    the client then uses it without closing it."""

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
        self._slots = asyncio.Semaphore(_http.MAX_IN_FLIGHT)

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
                async with self._slots:
                    response = await self._http.request(
                        call.method,
                        url,
                        params=dict(call.params) or None,
                        json=call.body,
                        headers=_http.headers(self._config, call),
                        timeout=self._timeout,
                    )
            except httpx.TransportError as exc:
                wait = _http.retry_wait(call, attempt, self._config, failure=exc)
                if wait is None:
                    raise _http.connection_error(call, url, exc) from exc
                await asyncio.sleep(wait)
                continue
            if response.status_code in _http.RETRY_STATUSES or response.status_code == 409:
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
        assert answer is not None  # every call built with an answer model has one
        return answer

    # --- stores ---

    @overload
    async def list_stores(
        self, instance_id: None = None, *, cursor: str | None = None, limit: int | None = None
    ) -> m.OrganizationStoreList: ...
    @overload
    async def list_stores(
        self, instance_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> m.StoreList: ...
    async def list_stores(
        self, instance_id: str | None = None, *, cursor: str | None = None, limit: int | None = None
    ) -> m.StoreList:
        """A page of the organization's stores (with the instances that could not be read in
        ``unreachable``), or of one instance's, by instance then name: at most ``limit`` (1,000
        by default), fewer when more would pass the answer's byte budget; pass the page's
        ``next_cursor`` as ``cursor`` for the next one."""
        if instance_id is None:
            return await self._answer(_http.list_organization_stores(cursor, limit))
        return await self._answer(_http.list_instance_stores(instance_id, cursor, limit))

    async def put_store(self, instance_id: str, name: str, **settings: Any) -> m.StoreView:
        """Create the store or change its settings (the fields of :class:`StorePut`; the ones
        not given keep their value). ``pydantic.ValidationError`` for an unknown setting."""
        return await self._answer(_http.put_store(instance_id, name, settings))

    async def get_store(self, instance_id: str, name: str) -> m.StoreView:
        """The store's settings, counts and last extraction."""
        return await self._answer(_http.get_store(instance_id, name))

    async def delete_store(self, instance_id: str, name: str) -> None:
        """Delete the store and everything it keeps."""
        await self.send(_http.delete_store(instance_id, name))

    async def create_key(
        self,
        access: Literal["read", "write"],
        *,
        name: str | None = None,
        instances: Sequence[str] | None = None,
        stores: Sequence[tuple[str, str]] | None = None,
        actors: Sequence[str] | None = None,
        expires_at: When = None,
    ) -> m.KeyCreated:
        """A new API key of the organization (with the admin key only), limited to
        ``instances``, ``stores`` (``(instance_id, store)`` pairs) and ``actors``, to
        ``access``, and expiring at ``expires_at``; its ``api_key`` is shown this once. Not
        retried: a retry could make a second key."""
        body = m.KeyCreate(
            name=name,
            access=access,
            instances=None if instances is None else list(instances),
            stores=None
            if stores is None
            else [m.StoreScope(instance_id=i, store=s) for i, s in stores],
            actors=None if actors is None else list(actors),
            expires_at=expires_at,
        )
        return await self._answer(_http.create_key(body))

    async def list_keys(self, cursor: str | None = None, limit: int | None = None) -> m.KeyList:
        """A page of the organization's API keys that have not expired, oldest first, never
        their secrets (admin key only): at most ``limit`` (1,000 by default), fewer when more
        would pass the answer's byte budget; pass the page's ``next_cursor`` as ``cursor`` for
        the next one."""
        return await self._answer(_http.list_keys(cursor, limit))

    async def delete_key(self, key_id: str) -> None:
        """Revoke an API key at once (admin key only); ``NotFoundError`` (``key_not_found``)."""
        await self.send(_http.delete_key(key_id))

    async def organization_usage(
        self, first: date | str | None = None, last: date | str | None = None
    ) -> m.UsageReport:
        """The organization's usage by day from ``first`` to ``last`` (UTC days, a ``date`` or
        ``"YYYY-MM-DD"``, at most 366; by default the last 30), over every store, and what its
        stores hold now (admin key only)."""
        return await self._answer(_http.organization_usage(first, last))

    def store(self, instance_id: str, name: str) -> AsyncStoreClient:
        """A handle on one store, sharing this client's connection pool."""
        return AsyncStoreClient(self, instance_id, name)


class AsyncStoreClient:
    """The routes of one store (``client.store(instance_id, name)``)."""

    def __init__(self, client: AsyncMemoryClient, instance_id: str, name: str) -> None:
        self._client = client
        self._prefix = _http.store_prefix(instance_id, name)
        self.instance_id = instance_id
        self.name = name

    @property
    def client(self) -> AsyncMemoryClient:
        """The client this handle sends through (closing it closes the handle too)."""
        return self._client

    def __repr__(self) -> str:
        return f"AsyncStoreClient(instance_id={self.instance_id!r}, name={self.name!r})"

    async def get_store(self) -> m.StoreView:
        """This store's settings and counts (``client.get_store`` of its instance and name)."""
        return await self._client.get_store(self.instance_id, self.name)

    async def add_events(
        self,
        session_id: str,
        events: Sequence[m.EventIn | Mapping[str, Any]],
        actor_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.EventsResult:
        """Add a turn's messages (dicts ``{"role", "content", "name"?, "created_at"?}`` or
        :class:`EventIn`) to the session. Sent with ``idempotency_key`` (1-255 visible ASCII;
        a new UUID when not given), so retries add them once."""
        call = _http.add_events(self._prefix, session_id, events, actor_id, idempotency_key)
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
        max_bytes: int | None = None,
        rerank: bool | None = None,
        min_score: float | None = None,
        reference_time: When = None,
        time_filter: bool | None = None,
    ) -> m.RecallView:
        """What the agent needs before its next model call: summary, recent messages, the
        actor's relevant memories, and ``context`` (all of it as one text). The answer stays
        under the server's byte budget, or ``max_bytes`` (at least 1,048,576) when lower: the
        oldest messages are left out first (``messages_omitted``), then the lowest ranked
        memories (``memories_omitted``). The store's reranker orders the memories unless
        ``rerank`` is False; memories scoring below ``min_score`` (as ``search``) are left
        out. A time the query names ranks its memories higher (kept alone with
        ``time_filter``), resolved against ``reference_time`` (default: the session's latest
        message)."""
        call = _http.recall(
            self._prefix,
            session_id,
            query,
            actor_id,
            limit,
            query_vector,
            types,
            max_bytes,
            rerank,
            min_score,
            reference_time,
            time_filter,
        )
        return await self._client._answer(call)

    async def list_sessions(
        self, offset: int | None = None, limit: int | None = None
    ) -> m.SessionList:
        """A page of sessions, most recent first."""
        return await self._client._answer(_http.list_sessions(self._prefix, offset, limit))

    async def get_session(
        self, session_id: str, recent: int | None = None, before_seq: int | None = None
    ) -> m.SessionView:
        """The session's summary, its newest ``recent`` messages (default 50; those before
        ``before_seq`` when given) and extraction. Messages that would take the answer over
        the server's byte budget are left out, oldest first (``messages_omitted``); ask again
        with ``before_seq`` set to the first message's ``seq`` for them."""
        call = _http.get_session(self._prefix, session_id, recent, before_seq)
        return await self._client._answer(call)

    async def delete_session(self, session_id: str) -> None:
        """Forget the session's working memory."""
        await self._client.send(_http.delete_session(self._prefix, session_id))

    async def pop_message(
        self, session_id: str, *, idempotency_key: str | None = None
    ) -> m.PoppedMessage:
        """Take back the session's newest message (``message`` is ``None`` when the session
        keeps none); its number goes to the next message. ``NotFoundError`` without the
        session; ``ConflictError`` (``session_busy``) while a background run reads it, after
        the retries (it is retried as its ``Retry-After`` says). Sent with ``idempotency_key``
        (a new UUID when not given), so a retry takes back one message, not two."""
        call = _http.pop_message(self._prefix, session_id, idempotency_key)
        return await self._client._answer(call)

    async def extract(
        self, session_id: str, *, idempotency_key: str | None = None
    ) -> m.ExtractionQueued:
        """Start the session's extraction now instead of after the delay."""
        call = _http.extract(self._prefix, session_id, idempotency_key)
        return await self._client._answer(call)

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
        idempotency_key: str | None = None,
    ) -> m.MemoryView:
        """Keep a memory (redacted, deduplicated: ``duplicate`` is true when the actor already
        had it); ``supersedes`` names a memory of the actor it replaces. Sent with
        ``idempotency_key`` (a new UUID when not given), so a retry keeps it once."""
        memory = _memory(
            text,
            actor_id,
            type,
            topics,
            vector,
            metadata,
            importance,
            confidence,
            supersedes,
            occurred_at,
        )
        call = _http.add_memory(self._prefix, memory, idempotency_key)
        return await self._client._answer(call)

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
        """A page of memories, newest first, optionally of one actor and one type; the current
        ones unless ``include_superseded``, or what was current ``as_of`` a time."""
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
        """One memory, with its previous versions."""
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
        idempotency_key: str | None = None,
    ) -> m.MemoryView:
        """Change the fields given (``importance=None`` clears it); the previous state is kept
        as a version. Sent with ``idempotency_key`` (a new UUID when not given), so a retry
        makes one version."""
        patch = _patch(
            text=text,
            type=type,
            topics=list(topics) if topics is not UNSET else UNSET,
            metadata=dict(metadata) if metadata is not UNSET else UNSET,
            importance=importance,
            vector=list(vector) if vector is not UNSET else UNSET,
        )
        call = _http.update_memory(self._prefix, memory_id, patch, idempotency_key)
        return await self._client._answer(call)

    async def delete_memory(self, memory_id: str) -> None:
        """Forget one memory. A retry after a lost answer can raise ``NotFoundError``."""
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
        rerank: bool | None = None,
        min_score: float | None = None,
        reference_time: When = None,
        time_filter: bool | None = None,
        time_ranking: bool | None = None,
    ) -> m.SearchResult:
        """Memories best first for ``query``: by meaning, keyword or both (current ones unless
        ``include_superseded``, or what was current ``as_of`` a time), ordered by the store's
        reranker when it has one (``reranked`` says whether it did) unless ``rerank`` is
        False. Each has a ``score`` from 0 to 1 and, with a query vector, its cosine as
        ``similarity``; those below ``min_score`` are left out (none when None or 0; 0.03
        suits MiniLM-like embeddings, docs/retrieval.md). A time the query names ("in May
        2023", "last week"; ``time_window`` in the answer) ranks its memories higher, or with
        ``time_filter`` keeps only them, resolved against ``reference_time`` (default now);
        ``time_ranking=False`` leaves the ranking as if it named none."""
        filters = _filters(
            include_superseded=include_superseded,
            as_of=as_of,
            topics=topics,
            metadata=metadata,
            created_after=created_after,
            created_before=created_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            reference_time=reference_time,
            time_filter=time_filter,
            time_ranking=time_ranking,
        )
        request = _search(
            query, mode, actor_id, types, limit, query_vector, filters, rerank, min_score
        )
        return await self._client._answer(_http.search(self._prefix, request))

    async def usage(
        self, first: date | str | None = None, last: date | str | None = None
    ) -> m.UsageReport:
        """The store's usage by day from ``first`` to ``last`` (UTC days, a ``date`` or
        ``"YYYY-MM-DD"``, at most 366; by default the last 30) and what it holds now."""
        return await self._client._answer(_http.usage(self._prefix, first, last))

    async def rotate_webhook_secret(self) -> m.WebhookSecret:
        """A new webhook signing secret, shown only in this answer; events from now on are
        signed with it. Not retried (a retry would replace the secret unseen)."""
        return await self._client._answer(_http.rotate_webhook_secret(self._prefix))

    async def webhook_deliveries(self) -> m.DeliveryList:
        """The store's last 100 webhook deliveries, newest first."""
        return await self._client._answer(_http.webhook_deliveries(self._prefix))

    async def forget_actor(self, actor_id: str) -> m.ActorForgotten:
        """Forget every memory of one actor, and its profile."""
        return await self._client._answer(_http.forget_actor(self._prefix, actor_id))

    # --- actors' profiles --------------------------------------------------------------------

    async def get_profile(self, actor_id: str) -> m.ProfileView:
        """The actor's profile: each of the store's ``profile_fields`` that holds a value, with
        when it was set and by whom."""
        return await self._client._answer(_http.get_profile(self._prefix, actor_id))

    async def update_profile(
        self,
        actor_id: str,
        fields: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> m.ProfileView:
        """Set the profile ``fields`` given (None clears one) in one step, each change kept as a
        version; the profile after. Sent with ``idempotency_key`` (a new UUID when not given),
        so a retry makes one version."""
        patch = m.ProfilePatch(fields=dict(fields))
        call = _http.update_profile(self._prefix, actor_id, patch, idempotency_key)
        return await self._client._answer(call)

    async def profile_history(self, actor_id: str, field: str) -> m.ProfileHistory:
        """The versions of one profile field of the actor, newest first."""
        return await self._client._answer(_http.profile_history(self._prefix, actor_id, field))

    # --- consolidation (docs/consolidation.md) -----------------------------------------------

    async def consolidate(
        self, actor_id: str, *, idempotency_key: str | None = None
    ) -> m.ConsolidationQueued:
        """Queue a run that merges, corrects and retires the actor's memories (or get the one
        already queued or running); ``ConflictError`` for a store without a language model.
        Poll ``get_consolidation`` for its outcome."""
        call = _con.consolidate(self._prefix, actor_id, idempotency_key)
        return await self._client._answer(call)

    async def list_consolidations(
        self,
        actor_id: str | None = None,
        status: str | Sequence[str] | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> m.ConsolidationList:
        """A page of the store's runs, newest first, without their steps: of one actor, of one
        status or several (``["proposed", "failed"]``)."""
        call = _con.list_consolidations(self._prefix, actor_id, status, offset, limit)
        return await self._client._answer(call)

    async def get_consolidation(self, consolidation_id: str) -> m.Consolidation:
        """One run with its steps, each with the memories before and after."""
        call = _con.get_consolidation(self._prefix, consolidation_id)
        return await self._client._answer(call)

    async def apply_consolidation(
        self, consolidation_id: str, *, idempotency_key: str | None = None
    ) -> m.Consolidation:
        """Apply a proposed run (review mode): the steps that still hold; the others are
        ``conflict`` steps. ``ConflictError`` when none holds or the run is not proposed."""
        call = _con.decide(self._prefix, consolidation_id, "apply", idempotency_key)
        return await self._client._answer(call)

    async def discard_consolidation(
        self, consolidation_id: str, *, idempotency_key: str | None = None
    ) -> m.Consolidation:
        """Discard a proposed run: nothing changes. ``ConflictError`` when it is not proposed."""
        call = _con.decide(self._prefix, consolidation_id, "discard", idempotency_key)
        return await self._client._answer(call)

    async def revert_consolidation(
        self, consolidation_id: str, *, idempotency_key: str | None = None
    ) -> m.Consolidation:
        """Undo an applied run: the memories it replaced are current again and its results
        are retired. ``ConflictError`` naming the results that changed since, if any did."""
        call = _con.decide(self._prefix, consolidation_id, "revert", idempotency_key)
        return await self._client._answer(call)

    async def restore_memory(
        self, memory_id: str, *, idempotency_key: str | None = None
    ) -> m.MemoryView:
        """Make a superseded or retired version current again: a new memory with its text and
        fields, superseding whatever of its chain is current. ``ConflictError`` when the
        version is current."""
        call = _con.restore_memory(self._prefix, memory_id, idempotency_key)
        return await self._client._answer(call)

    # --- keyed memories (a namespace and key of the caller's choosing) --------------------

    async def put_keyed_memory(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        texts: Sequence[str] | None = None,
        vectors: Sequence[Sequence[float]] | None = None,
        index: bool | None = None,
        ttl_seconds: float | None = None,
    ) -> m.KeyedMemoryView:
        """Keep ``value`` (a JSON object) under ``(namespace, key)``, replacing what was there:
        an atomic upsert, safe to retry. Found by meaning through ``vectors``, ``texts`` the
        store embeds, or its JSON when the store has an embedding model; ``index=False`` keeps
        it out of searches by meaning."""
        body = m.KeyedMemoryPut(
            namespace=list(namespace),
            key=key,
            value=dict(value),
            texts=None if texts is None else list(texts),
            vectors=None if vectors is None else [list(v) for v in vectors],
            index=index,
            ttl_seconds=ttl_seconds,
        )
        return await self._client._answer(_http.put_keyed_memory(self._prefix, body))

    async def get_keyed_memory(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool | None = None
    ) -> m.KeyedMemoryView:
        """The keyed memory under ``(namespace, key)``; ``NotFoundError``
        (``keyed_memory_not_found``) when there is none. ``refresh_ttl`` starts its expiry
        again from now."""
        call = _http.get_keyed_memory(self._prefix, namespace, key, refresh_ttl)
        return await self._client._answer(call)

    async def delete_keyed_memory(self, namespace: Sequence[str], key: str) -> None:
        """Forget the keyed memory under ``(namespace, key)``; ``NotFoundError`` when there is
        none."""
        await self._client.send(_http.delete_keyed_memory(self._prefix, namespace, key))

    async def search_keyed_memories(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: Mapping[str, Any] | None = None,
        query: str | None = None,
        query_vector: Sequence[float] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        refresh_ttl: bool | None = None,
    ) -> m.KeyedSearchResult:
        """Keyed memories under ``namespace_prefix`` matching ``filter``: most similar first
        with ``query`` (or ``query_vector``), else newest first; ``next_offset`` for the next
        page (the answer's byte budget may cut a page short: ``items_omitted``)."""
        body = m.KeyedSearchRequest(
            namespace_prefix=list(namespace_prefix),
            filter=None if filter is None else dict(filter),
            query=query,
            query_vector=None if query_vector is None else list(query_vector),
            limit=limit,
            offset=offset,
            refresh_ttl=refresh_ttl,
        )
        return await self._client._answer(_http.search_keyed_memories(self._prefix, body))

    async def list_keyed_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> m.NamespaceList:
        """The namespaces that hold keyed memories, in label order (``*`` in ``prefix`` or
        ``suffix``: any one label), cut to ``max_depth``; ``next_offset`` for the next page."""
        body = m.NamespacesRequest(
            prefix=None if prefix is None else list(prefix),
            suffix=None if suffix is None else list(suffix),
            max_depth=max_depth,
            limit=limit,
            offset=offset,
        )
        return await self._client._answer(_http.list_keyed_namespaces(self._prefix, body))

    # --- export and import (moving a store: tools/transfer.py) ----------------------------

    async def export_session_ids(
        self, cursor: str | None = None, limit: int | None = None
    ) -> m.SessionIdPage:
        """A page of the store's live session ids (in no order; drop repeats); pass the
        page's ``next_cursor`` for the next one."""
        call = _http.export_session_ids(self._prefix, cursor, limit)
        return await self._client._answer(call)

    async def export_session(
        self, session_id: str, after_seq: int | None = None, limit: int | None = None
    ) -> m.SessionExport:
        """A session's whole state and its messages after ``after_seq`` (oldest first, at
        most ``limit``, 1,000 by default); ``next_after_seq`` for the next page."""
        call = _http.export_session(self._prefix, session_id, after_seq, limit)
        return await self._client._answer(call)

    async def import_session(
        self, session_id: str, session: m.SessionImport | Mapping[str, Any]
    ) -> m.SessionImported:
        """Write an exported session's state and one page of its messages under its own id,
        sequence numbers and times (idempotent: retried like a read)."""
        body = session if isinstance(session, m.SessionImport) else _session_import(session)
        return await self._client._answer(_http.import_session(self._prefix, session_id, body))

    async def export_memories(
        self, cursor: str | None = None, limit: int | None = None
    ) -> m.MemoryExportPage:
        """A page of the store's live memories with every field, versions and vectors (drop
        repeats by id); pass the page's ``next_cursor`` for the next one."""
        call = _http.export_memories(self._prefix, cursor, limit)
        return await self._client._answer(call)

    async def export_profiles(
        self, cursor: str | None = None, limit: int | None = None
    ) -> m.ProfileExportPage:
        """A page of the store's actors' profiles with every field's history (drop repeats by
        actor); pass the page's ``next_cursor`` for the next one."""
        call = _http.export_profiles(self._prefix, cursor, limit)
        return await self._client._answer(call)

    async def import_profiles(
        self,
        profiles: Sequence[m.ImportedProfile | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> m.ProfileImportResult:
        """Write 1 to 100 exported profiles with their histories (idempotent: retried like a
        read)."""
        batch = m.ProfileImportBatch(
            profiles=[
                p if isinstance(p, m.ImportedProfile) else m.ImportedProfile.model_validate(p)
                for p in profiles
            ]
        )
        call = _http.import_profiles(self._prefix, batch, idempotency_key)
        return await self._client._answer(call)

    async def import_memories(
        self,
        memories: Sequence[m.ImportedMemory | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> m.MemoryImportResult:
        """Keep 1 to 100 exported memories under their own ids, times, links and vectors
        (idempotent: retried like a read)."""
        call = _http.import_memories(self._prefix, _batch(memories), idempotency_key)
        return await self._client._answer(call)
