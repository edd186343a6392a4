"""CrewAI's memory storage on a store's keyed memories: ``KiviDBStorage``.

``pip install "kividb-memory[crewai]"``. CrewAI 1.15 has one memory, ``crewai.Memory`` (the
short-term, long-term, entity and external memories of CrewAI 0.x were folded into it in 1.0),
whose storage is any ``StorageBackend`` (``crewai.memory.storage.backend``; LanceDB is its
default, Qdrant Edge its other). ``Memory(storage=KiviDBStorage(actor_id=...))`` keeps every
``MemoryRecord`` as one keyed memory: namespace ``("crewai", actor_id, *scope)`` (the record's
scope path, one label per segment), key the record's id, value the record's fields as JSON and
its embedding, the record's own vector for search by meaning. CrewAI embeds, analyses and
consolidates with its own models; the store keeps records exactly (no redaction, no dedupe).
Mapping and limits: docs/integrations.md, "CrewAI".

What does not map: a scope prefix matches whole segments (``/team`` takes ``/team/a``, not
``/teammates``; LanceDB's ``LIKE`` takes both); a record without an embedding (or with an all-
zero one: it has no cosine) is found by listing and filters but not by search (LanceDB scores it
as a zero vector); a scope holds at most 11,000 records as read by ``list_records``,
``get_scope_info`` and ``delete`` with filters (the API reads 1,000 a page, 10,000 deep), and a
search reads at most 20,000; the score is the API's ``(1 + cosine) / 2`` (LanceDB's is ``1 / (1
+ L2 distance)``). An embedding is kept as 32-bit floats, as LanceDB keeps it. Records expire
after the store's ``memory_ttl_seconds``.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from crewai.memory.storage.backend import EmbeddingDimensionMismatchError
from crewai.memory.types import MemoryRecord, ScopeInfo

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.errors import NotFoundError
from kividb_memory.integrations.sessions import AnyStore, label, run_now, store_from_env
from kividb_memory.models import KeyedMemoryView

Call = Callable[..., Awaitable[Any]]
PAGE = 1000
DEEPEST = 10_000
"""The API's largest ``offset`` of a keyed search."""


def scope_labels(scope: str | None) -> list[str]:
    """A scope path as namespace labels: one per segment, ``%`` and ``.`` percent-encoded
    (a label may not hold ``.``); ``[]`` for the root (``/``, ``""``, None)."""
    return [label(p) for p in (scope or "").split("/") if p]


def _pack(embedding: list[float] | None) -> str | None:
    if not embedding:
        return None
    return base64.b64encode(struct.pack(f"<{len(embedding)}f", *embedding)).decode("ascii")


def _unpack(packed: Any) -> list[float] | None:
    if not isinstance(packed, str):
        return None
    raw = base64.b64decode(packed)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def record_value(record: MemoryRecord) -> dict[str, Any]:
    """The keyed memory's value of a record: its fields (JSON) and its embedding as base64 of
    little-endian 32-bit floats. ``TypeError`` for metadata JSON cannot hold (a ``datetime``, a
    ``set``), as LanceDBStorage raises, before anything is written: it would not read back as
    given."""
    json.dumps(record.metadata)
    value: dict[str, Any] = record.model_dump(mode="json")
    value["embedding_f32"] = _pack(record.embedding)
    return value


def _record(view: KeyedMemoryView) -> MemoryRecord:
    value = dict(view.value)
    embedding = _unpack(value.pop("embedding_f32", None))
    return MemoryRecord.model_validate({**value, "embedding": embedding})


def _matches(
    record: MemoryRecord,
    categories: list[str] | None,
    metadata_filter: dict[str, Any] | None,
    older_than: datetime | None = None,
) -> bool:
    """CrewAI's own filters: any of ``categories``, all of ``metadata_filter``, created before
    ``older_than`` (as LanceDBStorage applies them)."""
    if categories and not any(c in record.categories for c in categories):
        return False
    if metadata_filter and not all(record.metadata.get(k) == v for k, v in metadata_filter.items()):
        return False
    return older_than is None or _naive(record.created_at) < _naive(older_than)


def _naive(moment: datetime) -> datetime:
    """A time as naive UTC, MemoryRecord's own kind (``datetime.utcnow``)."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _children(scopes: list[str], parent: str) -> list[str]:
    prefix = (parent.rstrip("/") + "/") if parent.strip("/") else "/"
    found = set()
    for scope in scopes:
        if scope.startswith(prefix) and scope.rstrip("/") != prefix.rstrip("/"):
            first = scope[len(prefix) :].split("/", 1)[0]
            if first:
                found.add(prefix + first)
    return sorted(found)


class _Records:
    """The storage's operations written once over ``call`` (``AnyStore.call`` or
    ``call_now``)."""

    def __init__(self, root: tuple[str, ...], ttl_seconds: float | None) -> None:
        self.root = root
        self.ttl_seconds = ttl_seconds
        self.dimensions: int | None = None

    async def check(self, call: Call, vectors: list[list[float] | None]) -> None:
        """CrewAI's ``EmbeddingDimensionMismatchError`` (the store's dimensions, the vector's)
        for the first vector that is not the store's size, before anything is written."""
        if self.dimensions is None:
            self.dimensions = int((await call("get_store")).dimensions)
        for vector in vectors:
            if vector and len(vector) != self.dimensions:
                raise EmbeddingDimensionMismatchError(self.dimensions, len(vector))

    def namespace(self, scope: str | None) -> tuple[str, ...]:
        return (*self.root, *scope_labels(scope))

    async def scan(self, call: Call, scope_prefix: str | None) -> list[MemoryRecord]:
        """Every record at or below ``scope_prefix`` (the API's newest-first order)."""
        found: list[MemoryRecord] = []
        offset = 0
        while offset <= DEEPEST:
            page = await call(
                "search_keyed_memories", self.namespace(scope_prefix), limit=PAGE, offset=offset
            )
            found.extend(_record(view) for view in page.items)
            if page.next_offset is None:  # a page may be cut short by bytes: follow it
                break
            offset = page.next_offset
        return found

    async def put(self, call: Call, record: MemoryRecord) -> None:
        kwargs: dict[str, Any] = {"ttl_seconds": self.ttl_seconds}
        if record.embedding and any(record.embedding):  # a zero vector has no direction
            kwargs["vectors"] = [[float(x) for x in record.embedding]]
        else:
            kwargs["index"] = False
        await call(
            "put_keyed_memory",
            self.namespace(record.scope),
            record.id,
            record_value(record),
            **kwargs,
        )

    async def get(self, call: Call, record_id: str) -> tuple[MemoryRecord, KeyedMemoryView] | None:
        found = await call("search_keyed_memories", self.root, filter={"id": record_id}, limit=1)
        if not found.items:
            return None
        return _record(found.items[0]), found.items[0]

    async def remove(
        self, call: Call, view_namespace: list[str] | tuple[str, ...], key: str
    ) -> bool:
        try:
            await call("delete_keyed_memory", tuple(view_namespace), key)
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise
            return False
        return True

    async def save(self, call: Call, records: list[MemoryRecord]) -> None:
        for record in records:
            json.dumps(record.metadata)  # TypeError before anything is written
        await self.check(call, [r.embedding for r in records])
        for record in records:
            await self.update(call, record)

    async def update(self, call: Call, record: MemoryRecord) -> None:
        """Put the record where its scope says, and forget it where it was (a record whose
        scope changed)."""
        record_value(record)  # TypeError before anything is written
        await self.check(call, [record.embedding])
        old = await self.get(call, record.id)
        await self.put(call, record)
        if old is not None and tuple(old[1].namespace) != self.namespace(record.scope):
            await self.remove(call, old[1].namespace, record.id)

    async def search(
        self,
        call: Call,
        query_embedding: list[float],
        scope_prefix: str | None,
        categories: list[str] | None,
        metadata_filter: dict[str, Any] | None,
        limit: int,
        min_score: float,
    ) -> list[tuple[MemoryRecord, float]]:
        await self.check(call, [query_embedding])
        if limit <= 0:
            return []
        wanted = limit * 3 if (categories or metadata_filter) else limit
        found = await call(
            "search_keyed_memories",
            self.namespace(scope_prefix),
            query_vector=[float(x) for x in query_embedding],
            limit=min(wanted, PAGE),
        )
        out: list[tuple[MemoryRecord, float]] = []
        for view in found.items:
            record = _record(view)
            score = float(view.score if view.score is not None else 0.0)
            if _matches(record, categories, metadata_filter) and score >= min_score:
                out.append((record, score))
        return out[:limit]

    async def delete(
        self,
        call: Call,
        scope_prefix: str | None,
        categories: list[str] | None,
        record_ids: list[str] | None,
        older_than: datetime | None,
        metadata_filter: dict[str, Any] | None,
    ) -> int:
        prefix = self.namespace(scope_prefix)
        if record_ids:
            targets = [found for rid in record_ids if (found := await self.get(call, rid))]
            targets = [
                (r, v)
                for r, v in targets
                if tuple(v.namespace)[: len(prefix)] == prefix
                and _matches(r, categories, metadata_filter, older_than)
            ]
            pairs = [(v.namespace, r.id) for r, v in targets]
        else:
            records = await self.scan(call, scope_prefix)
            pairs = [
                (list(self.namespace(r.scope)), r.id)
                for r in records
                if _matches(r, categories, metadata_filter, older_than)
            ]
        deleted = 0
        for namespace, key in pairs:
            deleted += await self.remove(call, namespace, key)
        return deleted

    async def touch(self, call: Call, record_ids: list[str]) -> None:
        now = datetime.utcnow()  # MemoryRecord's times are naive UTC
        for record_id in record_ids:
            found = await self.get(call, record_id)
            if found is not None:
                await self.put(call, found[0].model_copy(update={"last_accessed": now}))

    async def list_records(
        self, call: Call, scope_prefix: str | None, limit: int, offset: int
    ) -> list[MemoryRecord]:
        if limit <= 0 or offset < 0:
            return []
        records = await self.scan(call, scope_prefix)
        records.sort(key=lambda r: _naive(r.created_at), reverse=True)
        return records[offset : offset + limit]

    async def scope_info(self, call: Call, scope: str) -> ScopeInfo:
        path = scope.rstrip("/") or "/"
        records = await self.scan(call, path)
        times = [r.created_at for r in records]
        return ScopeInfo(
            path=path,
            record_count=len(records),
            categories=sorted({c for r in records for c in r.categories}),
            oldest_record=min(times, key=_naive) if times else None,
            newest_record=max(times, key=_naive) if times else None,
            child_scopes=_children([r.scope for r in records], path),
        )

    async def list_scopes(self, call: Call, parent: str) -> list[str]:
        records = await self.scan(call, parent)
        return _children([r.scope for r in records], parent)

    async def list_categories(self, call: Call, scope_prefix: str | None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in await self.scan(call, scope_prefix):
            for category in record.categories:
                counts[category] = counts.get(category, 0) + 1
        return counts

    async def count(self, call: Call, scope_prefix: str | None) -> int:
        return len(await self.scan(call, scope_prefix))

    async def reset(self, call: Call, scope_prefix: str | None) -> None:
        for record in await self.scan(call, scope_prefix):
            await self.remove(call, self.namespace(record.scope), record.id)


class KiviDBStorage:
    """A CrewAI ``StorageBackend`` on the keyed memories under ``("crewai", actor_id)``: pass
    it as ``Memory(storage=KiviDBStorage(actor_id="crew-7"))``. ``actor_id``: whose memory this
    is (a user, a crew; CrewAI has no user of its own), one namespace label (no ``.``).
    ``store``: a ``StoreClient`` (sync and async methods) or an ``AsyncStoreClient`` (the async
    ones: ``asave``, ``asearch``, ``adelete``; a sync one raises ``TypeError``), None for one
    from ``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE``. The
    store's ``dimensions`` must be the embedder's (a mismatch is the API's 422,
    ``ValidationError``). ``ttl_seconds``: how long a record lives after its last write (default
    the store's ``memory_ttl_seconds``). Errors: the client's (``ApiError`` and its kinds,
    ``ApiConnectionError``).

    Writes are keyed upserts (a record's id is its key), so a save CrewAI retries keeps the
    record once; ``save`` of several records is one write each, in order."""

    def __init__(
        self,
        *,
        actor_id: str,
        store: StoreClient | AsyncStoreClient | None = None,
        ttl_seconds: float | None = None,
    ) -> None:
        if not isinstance(actor_id, str) or not actor_id or "." in actor_id:
            raise ValueError("actor_id: a non-empty string without '.'")
        self.actor_id = actor_id
        self._records = _Records(("crewai", actor_id), ttl_seconds)
        self._store = AnyStore(store if store is not None else store_from_env())

    # --- sync (StoreClient) -----------------------------------------------------------------

    def save(self, records: list[MemoryRecord]) -> None:
        """Keep each record (its id the key: saving an id again replaces it)."""
        run_now(self._records.save(self._store.call_now, records))

    def search(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """The records most similar to ``query_embedding`` at or below ``scope_prefix``, with
        any of ``categories`` and all of ``metadata_filter``, scoring at least ``min_score``
        (0 to 1), best first, at most ``limit``."""
        found = self._records.search(
            self._store.call_now,
            query_embedding,
            scope_prefix,
            categories,
            metadata_filter,
            limit,
            min_score,
        )
        return run_now(found)

    def delete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        """Forget the records that meet every criterion given; how many were forgotten."""
        return run_now(
            self._records.delete(
                self._store.call_now,
                scope_prefix,
                categories,
                record_ids,
                older_than,
                metadata_filter,
            )
        )

    def update(self, record: MemoryRecord) -> None:
        """Replace the record with the same id (moved if its scope changed)."""
        run_now(self._records.update(self._store.call_now, record))

    def touch_records(self, record_ids: list[str]) -> None:
        """Set ``last_accessed`` of each record to now."""
        run_now(self._records.touch(self._store.call_now, record_ids))

    def get_record(self, record_id: str) -> MemoryRecord | None:
        """The record with ``record_id``, or None."""
        found = run_now(self._records.get(self._store.call_now, record_id))
        return None if found is None else found[0]

    def list_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        """A page of the records at or below ``scope_prefix``, newest ``created_at`` first."""
        return run_now(
            self._records.list_records(self._store.call_now, scope_prefix, limit, offset)
        )

    def get_scope_info(self, scope: str) -> ScopeInfo:
        """Count, categories, oldest and newest record, and child scopes of ``scope``."""
        return run_now(self._records.scope_info(self._store.call_now, scope))

    def list_scopes(self, parent: str = "/") -> list[str]:
        """The scopes one segment below ``parent`` that hold records."""
        return run_now(self._records.list_scopes(self._store.call_now, parent))

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        """Each category at or below ``scope_prefix`` with its number of records."""
        return run_now(self._records.list_categories(self._store.call_now, scope_prefix))

    def count(self, scope_prefix: str | None = None) -> int:
        """How many records are at or below ``scope_prefix``."""
        return run_now(self._records.count(self._store.call_now, scope_prefix))

    def reset(self, scope_prefix: str | None = None) -> None:
        """Forget every record at or below ``scope_prefix`` (all of the actor's when None)."""
        run_now(self._records.reset(self._store.call_now, scope_prefix))

    # --- async (either client) ------------------------------------------------------------

    async def asave(self, records: list[MemoryRecord]) -> None:
        """``save`` for async code."""
        await self._records.save(self._store.call, records)

    async def asearch(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """``search`` for async code."""
        return await self._records.search(
            self._store.call,
            query_embedding,
            scope_prefix,
            categories,
            metadata_filter,
            limit,
            min_score,
        )

    async def adelete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        """``delete`` for async code."""
        return await self._records.delete(
            self._store.call, scope_prefix, categories, record_ids, older_than, metadata_filter
        )


__all__ = ["KiviDBStorage", "record_value", "scope_labels"]
