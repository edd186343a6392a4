"""LangGraph's ``BaseStore`` on a store's keyed memories: ``KiviDBStore``.

``pip install "kividb-memory[langgraph]"``. Each item is the keyed memory under its namespace
and key (``PUT/GET/DELETE .../keyed-memories``); ``search`` and ``list_namespaces`` are the
API's keyed search and namespace listing, so filters, paging and similarity run in the service,
not here. What maps to what, and what does not fit: docs/integrations.md, "LangGraph".

With an ``index`` config (``dims``, ``embed``, ``fields``, as LangGraph's own stores take it) the
store embeds here, with ``embed``: each item's texts at ``fields`` (LangGraph's path syntax,
``langgraph.store.base.embed.get_text_at_path``) become its vectors, one per text, and a query
its ``query_vector``; an item scores as the best of its vectors (its cosine similarity). Without
one, the store's own embedding model embeds the value's JSON text (or the texts at ``index=[...]``
of a put) and the query, on the server.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.errors import NotFoundError, ValidationError
from kividb_memory.integrations.sessions import AnyStore, run_now, store_from_env
from kividb_memory.models import KeyedMemoryView

Call = Callable[..., Awaitable[Any]]
_LARGEST = sys.float_info.max


class _Nothing(Exception):
    """A filter no value can match (a NaN operand, or beyond every number)."""


def _operand(op: str, operand: Any) -> dict[str, Any] | None:
    """One operator of a filter as the API's JSON can carry it: JSON has no NaN or infinity,
    so an operand that is one becomes the condition it means for finite numbers (``$lt: inf``
    is any number: ``$lte`` the largest float), None for a condition every value meets, or
    ``_Nothing`` for one none does (IEEE 754: NaN is unequal and unordered to all)."""
    if not isinstance(operand, float) or math.isfinite(operand):
        return {op: operand}
    if math.isnan(operand):
        if op == "$ne":
            return None
        raise _Nothing
    positive = operand > 0
    if op in ("$lt", "$lte") and positive:
        return {"$lte": _LARGEST}
    if op in ("$gt", "$gte") and not positive:
        return {"$gte": -_LARGEST}
    if op == "$ne":
        return None
    raise _Nothing  # $eq an infinity, above +inf or below -inf


def api_filter(conditions: dict[str, Any] | None) -> dict[str, Any] | None:
    """A LangGraph search ``filter`` as the API takes it (non-finite operands rewritten, see
    ``_operand``); ``_Nothing`` when no value can match it."""
    if not conditions:
        return None
    out: dict[str, Any] = {}
    for path, wanted in conditions.items():
        if isinstance(wanted, dict) and wanted and all(str(k).startswith("$") for k in wanted):
            merged: dict[str, Any] = {}
            for op, operand in wanted.items():
                merged.update(_operand(op, operand) or {})
            if merged:
                out[path] = merged
        elif isinstance(wanted, float) and not math.isfinite(wanted):
            raise _Nothing  # equal to NaN or an infinity: no JSON value is
        else:
            out[path] = wanted
    return out or None


def _item(view: KeyedMemoryView) -> Item:
    return Item(
        value=view.value,
        key=view.key,
        namespace=tuple(view.namespace),
        created_at=view.created_at,
        updated_at=view.updated_at,
    )


def _search_item(view: KeyedMemoryView) -> SearchItem:
    return SearchItem(
        namespace=tuple(view.namespace),
        key=view.key,
        value=view.value,
        created_at=view.created_at,
        updated_at=view.updated_at,
        score=view.similarity,
    )


class KiviDBStore(BaseStore):
    """A LangGraph store on a KiviDB store's keyed memories.

    ``store``: a ``StoreClient`` (sync and async methods) or an ``AsyncStoreClient`` (async
    methods; the sync ones from other threads while its event loop runs, as LangGraph's async
    stores allow), or None for one from ``KIVIDB_API_URL``, ``KIVIDB_API_KEY``,
    ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE``. ``index``: LangGraph's ``IndexConfig``
    (``dims``, ``embed``, ``fields``) to embed here; ``dims`` must be the store's
    ``dimensions``. ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` in minutes,
    ``refresh_on_read``); without ``default_ttl`` an item lives the store's
    ``memory_ttl_seconds``.

    Errors: ``InvalidNamespaceError`` (a label empty, not a string, or holding ``.``) before
    any op of the batch runs; ``ValueError`` for a filter key the API refuses (``Invalid
    filter key ...``); the client's ``ApiError`` kinds for the rest."""

    supports_ttl = True

    def __init__(
        self,
        store: StoreClient | AsyncStoreClient | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self._any = AnyStore(store if store is not None else store_from_env())
        self.index_config: dict[str, Any] | None = None
        self.embeddings = None
        self._fields: list[tuple[str, list[str]]] = [("$", ["$"])]
        if index is not None:
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            fields = list(index.get("fields") or ["$"])
            self._fields = [(f, ["$"] if f == "$" else tokenize_path(f)) for f in fields]
        self.ttl_config = ttl
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- the two entry points ------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order, each op's result at its place (``None`` for a put)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        if isinstance(self._any.store, AsyncStoreClient):
            return self._batch_on_loop(ops)
        vectors = self._embed_sync(ops)
        return run_now(self._run(self._any.call_now, ops, vectors))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` for async code (a ``StoreClient``'s calls run in a worker thread)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        if isinstance(self._any.store, AsyncStoreClient):
            self._loop = asyncio.get_running_loop()
        vectors = await self._embed_async(ops)
        return await self._run(self._any.call, ops, vectors)

    def _batch_on_loop(self, ops: list[Op]) -> list[Result]:
        """A sync batch with an ``AsyncStoreClient``: run on the event loop its async calls
        use, from another thread (as ``AsyncSqliteStore`` does)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            raise asyncio.InvalidStateError(
                "Synchronous calls to a KiviDBStore on an AsyncStoreClient cannot run in the "
                "event loop's thread (they would block it); use the a-methods (aget, aput, "
                "asearch...)."
            )
        if self._loop is None or self._loop.is_closed():
            raise TypeError(
                "this call is synchronous: pass a StoreClient (MemoryClient().store(...)), or "
                "call an async method first so the store knows its event loop"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    # --- embedding (with an index config only) --------------------------------------------

    def _texts(self, op: PutOp) -> list[str]:
        """The texts of a put's value at the op's ``index`` paths, else the config's."""
        assert op.value is not None
        if isinstance(op.index, list):
            paths = [["$"] if f == "$" else tokenize_path(f) for f in op.index]
        else:
            paths = [tokens for _, tokens in self._fields]
        texts: list[str] = []
        for tokens in paths:
            texts.extend(get_text_at_path(op.value, "$" if tokens == ["$"] else cast(Any, tokens)))
        return texts

    def _wanted(self, ops: list[Op]) -> tuple[list[tuple[int, list[str]]], list[tuple[int, str]]]:
        """What to embed here: each indexed put's texts, each search's query, by op index."""
        puts: list[tuple[int, list[str]]] = []
        queries: list[tuple[int, str]] = []
        if self.embeddings is None:
            return puts, queries
        for i, op in enumerate(ops):
            if isinstance(op, PutOp) and op.value is not None and op.index is not False:
                texts = self._texts(op)
                if texts:
                    puts.append((i, texts))
            elif isinstance(op, SearchOp) and op.query:
                queries.append((i, op.query))
        return puts, queries

    def _embed_sync(self, ops: list[Op]) -> dict[int, Any]:
        puts, queries = self._wanted(ops)
        if self.embeddings is None:
            return {}
        found: dict[int, Any] = {}
        if puts:
            flat = self.embeddings.embed_documents([t for _, texts in puts for t in texts])
            found.update(_split(puts, flat))
        for i, query in queries:
            found[i] = self.embeddings.embed_query(query)
        return found

    async def _embed_async(self, ops: list[Op]) -> dict[int, Any]:
        puts, queries = self._wanted(ops)
        if self.embeddings is None:
            return {}
        found: dict[int, Any] = {}
        if puts:
            flat = await self.embeddings.aembed_documents([t for _, texts in puts for t in texts])
            found.update(_split(puts, flat))
        for i, query in queries:
            found[i] = await self.embeddings.aembed_query(query)
        return found

    # --- the ops ---------------------------------------------------------------------------

    async def _run(self, call: Call, ops: list[Op], vectors: dict[int, Any]) -> list[Result]:
        results: list[Result] = []
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results.append(await self._get(call, op))
            elif isinstance(op, PutOp):
                await self._put(call, op, vectors.get(i))
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(call, op, vectors.get(i)))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._namespaces(call, op))
            else:
                raise TypeError(f"unknown op {type(op).__name__}")
        return results

    def _refresh(self, asked: bool | None) -> bool:
        return bool(asked and self.ttl_config and self.ttl_config.get("refresh_on_read", True))

    async def _get(self, call: Call, op: GetOp) -> Item | None:
        try:
            view = await call(
                "get_keyed_memory", op.namespace, op.key, refresh_ttl=self._refresh(op.refresh_ttl)
            )
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise
            return None
        return _item(view)

    async def _put(self, call: Call, op: PutOp, vectors: Any) -> None:
        if op.value is None:
            try:
                await call("delete_keyed_memory", op.namespace, op.key)
            except NotFoundError as exc:
                if exc.code != "keyed_memory_not_found":
                    raise
            return
        kwargs: dict[str, Any] = {}
        if op.ttl is not None:
            kwargs["ttl_seconds"] = op.ttl * 60
        if op.index is False:
            kwargs["index"] = False
        elif self.embeddings is not None:
            if vectors is None:
                kwargs["index"] = False  # no text at its fields: found by filters only
            else:
                kwargs["vectors"] = [list(map(float, v)) for v in vectors]
        elif isinstance(op.index, list):  # the store's model embeds the texts at these paths
            texts = self._texts(op)
            kwargs.update({"texts": texts} if texts else {"index": False})
        try:
            await call("put_keyed_memory", op.namespace, op.key, op.value, **kwargs)
        except ValidationError as exc:
            if exc.code != "vector_required" or "texts" not in kwargs:
                raise
            # No embedding model anywhere: LangGraph's stores ignore `index` without an index
            # config, and so does this one.
            del kwargs["texts"]
            await call("put_keyed_memory", op.namespace, op.key, op.value, **kwargs)

    async def _search(self, call: Call, op: SearchOp, query_vector: Any) -> list[SearchItem]:
        try:
            conditions = api_filter(op.filter)
        except _Nothing:
            return []
        kwargs: dict[str, Any] = {"filter": conditions, "limit": op.limit, "offset": op.offset}
        if query_vector is not None:
            kwargs["query_vector"] = [float(x) for x in query_vector]
        elif op.query and self.embeddings is None:
            kwargs["query"] = op.query
        if self._refresh(op.refresh_ttl):
            kwargs["refresh_ttl"] = True
        try:
            found = await call("search_keyed_memories", op.namespace_prefix, **kwargs)
        except ValidationError as exc:
            if any(d.field.startswith("filter") for d in exc.details or []):
                raise ValueError(exc.message) from exc
            if exc.code != "vector_required" or "query" not in kwargs:
                raise
            # No embedding model anywhere: a query is ignored, as LangGraph's stores ignore it
            # without an index config (newest first, filters applied).
            del kwargs["query"]
            found = await call("search_keyed_memories", op.namespace_prefix, **kwargs)
        return [_search_item(view) for view in found.items]

    async def _namespaces(self, call: Call, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix = suffix = None
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix" and prefix is None:
                prefix = list(condition.path)
            elif condition.match_type == "suffix" and suffix is None:
                suffix = list(condition.path)
        found = await call(
            "list_keyed_namespaces",
            prefix=prefix or None,
            suffix=suffix or None,
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
        )
        return [tuple(ns) for ns in found.namespaces]


def _split(puts: Sequence[tuple[int, list[str]]], flat: Sequence[Any]) -> dict[int, Any]:
    """The flat list of embeddings cut back into each put's rows."""
    found: dict[int, Any] = {}
    at = 0
    for i, texts in puts:
        found[i] = flat[at : at + len(texts)]
        at += len(texts)
    return found


__all__ = ["KiviDBStore", "api_filter"]
