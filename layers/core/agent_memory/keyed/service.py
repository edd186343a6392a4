"""Keyed memories of one store: ``KeyedMemories``, the use cases of the ``/keyed-memories``
routes.

Each namespace's memories share a slot (``database.keys.KeyedKeys``): an upsert, a delete or a
refresh is one script there. The store's registry of namespaces (``keyed_namespaces``, in the
store's slot) names every namespace that holds some, with the latest expiry written to it; it
is written before the namespace's memories, so a memory is never kept where the registry does
not see it. A registered namespace found empty is dropped from the registry only once it is
older than ``REGISTRATION_GRACE_MS`` and only if nothing registered it since (a
compare-and-delete), so a write between the two steps is never hidden.

Searches and listings read the registry whole, then the namespaces they take, and filter and
rank in the function: a search reads at most ``MAX_SCANNED`` keyed memories, a chunk at a time,
keeping only what it needs to rank them (``keyed.ranking``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray
from redis.commands.core import Script

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, largest_fitting
from agent_memory.clock import from_ms, to_ms
from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.keys import KeyedKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import EmbeddingRequired, KeyedMemoryNotFound, StoreTooLarge
from agent_memory.keyed import scripts
from agent_memory.keyed.filters import check_filter, listed, under_prefix
from agent_memory.keyed.models import (
    MAX_NAMESPACE_OFFSET,
    MAX_SEARCH_OFFSET,
    KeyedMemoryPut,
    KeyedMemoryView,
    KeyedRecord,
    KeyedSearchRequest,
    KeyedSearchResult,
    NamespaceList,
    NamespacesRequest,
)
from agent_memory.keyed.ranking import Ranked, Search
from agent_memory.keyed.records import Entry, encode_entry, namespace_digest, namespace_field
from agent_memory.memories.reads import unit
from agent_memory.providers.embeddings import Embedder, validate_vector
from agent_memory.stores.database import StoreDatabase

MAX_SCANNED = 20_000
"""The most keyed memories one search reads (under its ``namespace_prefix``); more is 409
``store_too_large``, asking for a narrower prefix (docs/limits.md)."""
REGISTRATION_GRACE_MS = 60_000
"""How long a namespace registered but found empty stays registered: longer than any write
takes between registering a namespace and keeping its memory."""


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def _search_result(page: list[Ranked], offset: int, limit: int, matches: int) -> KeyedSearchResult:
    """The answer holding ``page``, the first of ``limit`` matches asked from ``offset`` (of
    ``matches`` in all): how many of the limit it left out, and the offset of the rest."""
    after = offset + len(page)
    asked = min(limit, matches - offset) if matches > offset else 0
    return KeyedSearchResult(
        items=[entry.view(expiry, **scores) for entry, expiry, scores in page],
        items_omitted=max(0, asked - len(page)),
        next_offset=after if after < matches and after <= MAX_SEARCH_OFFSET else None,
    )


class KeyedMemories:
    """The keyed memories of ``store``, on ``client`` (a client that answers bytes: entries
    carry float32 vectors). Errors: ``KeyedMemoryNotFound``, ``ValidationFailed`` (and its
    ``VectorInvalid`` / ``EmbeddingRequired``), ``StoreTooLarge``, provider errors from the
    embedder, ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase, embedder: Embedder) -> None:
        self._redis = db.binary
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._embedder = embedder

    def _script(self, source: str) -> Script:
        """``source`` loaded on this client at its first use (``load_script`` keeps it): a
        read that runs no script loads none."""
        return load_script(self._redis, source)

    def _namespace_keys(self, namespace: Sequence[str]) -> KeyedKeys:
        return self._keys.keyed(namespace_digest(namespace))

    # --- writes ------------------------------------------------------------------------------

    def put(self, body: KeyedMemoryPut) -> KeyedMemoryView:
        """Keep ``body.value`` under its namespace and key in one atomic step, replacing what
        was there (its ``created_at`` stays unless it had expired); the memory as kept."""
        vectors = self._vectors(body)
        now = self._clock.now()
        now_ms = to_ms(now)
        ttl_seconds = body.ttl_seconds or self._store.memory_ttl_seconds
        ttl_ms = max(1, round(ttl_seconds * 1000))
        expires_ms = now_ms + ttl_ms
        record = KeyedRecord(
            namespace=body.namespace,
            key=body.key,
            value=body.value,
            updated_at=now_ms,
            dims=0 if vectors is None else int(vectors.shape[1]),
            vectors=0 if vectors is None else int(vectors.shape[0]),
        )
        keys = self._namespace_keys(body.namespace)
        with database_errors():
            self._script(scripts.REGISTER)(
                keys=[self._keys.keyed_namespaces],
                args=[namespace_field(body.namespace), expires_ms, now_ms],
            )
            created = self._script(scripts.PUT)(
                keys=keys.all(),
                args=[body.key, now_ms, expires_ms, ttl_ms, encode_entry(record, vectors)],
            )
        return KeyedMemoryView(
            namespace=record.namespace,
            key=record.key,
            value=record.value,
            created_at=from_ms(int(_text(created))),
            updated_at=from_ms(now_ms),
            expires_at=from_ms(expires_ms),
        )

    def _vectors(self, body: KeyedMemoryPut) -> NDArray[np.float32] | None:
        """The unit rows a put keeps: its ``vectors``, the store's embeddings of its ``texts``,
        of its value's JSON text when it gives neither and the store has an embedding model,
        or None (``index`` false, or nothing to embed with)."""
        if not body.index:
            return None
        if body.vectors is not None:
            rows = [
                unit(validate_vector(v, self._store.dimensions, f"vectors[{i}]"), f"vectors[{i}]")
                for i, v in enumerate(body.vectors)
            ]
            return np.stack(rows)
        if body.texts is not None:
            if self._store.embed_provider == "none":
                raise EmbeddingRequired("vectors")
            texts = body.texts
        elif self._store.embed_provider != "none":
            texts = [json.dumps(body.value, sort_keys=True, ensure_ascii=False)]
        else:
            return None
        embedded = self._embedder.embed(texts)
        return np.stack([unit(row, "texts") for row in embedded])

    def delete(self, namespace: list[str], key: str) -> None:
        """Remove the memory under ``namespace`` and ``key``; ``KeyedMemoryNotFound`` when
        none is live there (nothing changes)."""
        with database_errors():
            removed = self._script(scripts.DELETE)(
                keys=self._namespace_keys(namespace).all(),
                args=[key, to_ms(self._clock.now())],
            )
        if not int(removed):
            raise KeyedMemoryNotFound(namespace, key)

    # --- reads -------------------------------------------------------------------------------

    def get(self, namespace: list[str], key: str, refresh_ttl: bool = False) -> KeyedMemoryView:
        """The memory under ``namespace`` and ``key``; with ``refresh_ttl`` its expiry starts
        again from now. ``KeyedMemoryNotFound`` when none is live there."""
        keys = self._namespace_keys(namespace)
        now_ms = to_ms(self._clock.now())
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            pipe.hget(keys.items, key)
            pipe.zscore(keys.expiry, key)
            raw, expiry = pipe.execute()
        if raw is None or expiry is None or expiry <= now_ms:
            raise KeyedMemoryNotFound(namespace, key)
        entry = Entry(raw)
        if refresh_ttl:
            expiry = self._refreshed(namespace, [entry], now_ms).get(key, expiry)
        return entry.view(expiry)

    def _refreshed(
        self, namespace: Sequence[str], entries: Sequence[Entry], now_ms: int
    ) -> dict[str, float]:
        """Start the expiry of ``entries`` (of one namespace) again from ``now_ms``: the
        registry first (so it never says a namespace expired before its memories), then the
        memories; their new expiries by key (those that were still live)."""
        latest = max(now_ms + e.ttl_ms for e in entries)
        keys = self._namespace_keys(namespace)
        with database_errors():
            self._script(scripts.REGISTER)(
                keys=[self._keys.keyed_namespaces],
                args=[namespace_field(namespace), latest, now_ms],
            )
            fresh = self._script(scripts.REFRESH)(
                keys=keys.all(), args=[now_ms, *(e.record.key for e in entries)]
            )
        return {
            e.record.key: float(_text(f))
            for e, f in zip(entries, fresh, strict=True)
            if int(_text(f))
        }

    def _registered(self, now_ms: int) -> dict[tuple[str, ...], tuple[str, int, int]]:
        """The registry: namespace -> (its raw value, expiry ms, registered ms)."""
        with database_errors():
            raw = self._redis.hgetall(self._keys.keyed_namespaces)
        found: dict[tuple[str, ...], tuple[str, int, int]] = {}
        for field, value in raw.items():
            text = _text(value)
            expiry, _, seen = text.partition(":")
            found[tuple(json.loads(_text(field)))] = (text, int(expiry), int(seen or 0))
        return found

    def _forget(self, stale: Iterable[tuple[tuple[str, ...], str]]) -> None:
        """Drop registry entries found expired or empty, each only if unchanged since."""
        for namespace, value in stale:
            with unless_writes_refused():
                self._script(scripts.UNREGISTER)(
                    keys=[self._keys.keyed_namespaces], args=[namespace_field(namespace), value]
                )

    def namespaces(
        self, request: NamespacesRequest, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> NamespaceList:
        """The namespaces that hold live keyed memories and that ``request`` takes, in label
        order, each once (after the cut to ``max_depth``): ``request.limit`` of them from
        ``request.offset``, fewer when more would pass ``budget`` bytes as Lambda carries the
        answer (``answers.largest_fitting``), with the offset of the rest."""
        now_ms = to_ms(self._clock.now())
        registered = self._registered(now_ms)
        candidates = [ns for ns, (_, expiry, _) in registered.items() if expiry > now_ms]
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            for namespace in candidates:
                pipe.exists(self._namespace_keys(namespace).items)
            present = [bool(n) for n in pipe.execute()] if candidates else []
        held = {ns for ns, here in zip(candidates, present, strict=True) if here}
        self._forget(
            (ns, value)
            for ns, (value, expiry, seen) in registered.items()
            if ns not in held and (expiry <= now_ms or seen < now_ms - REGISTRATION_GRACE_MS)
        )
        chosen = {
            ns[: request.max_depth] if request.max_depth else ns
            for ns in held
            if listed(ns, request.prefix, request.suffix)
        }
        ordered = sorted(chosen)
        page = ordered[request.offset : request.offset + request.limit]

        def build(count: int) -> NamespaceList:
            after = request.offset + count
            more = after < len(ordered) and after <= MAX_NAMESPACE_OFFSET
            return NamespaceList(
                namespaces=[list(ns) for ns in page[:count]], next_offset=after if more else None
            )

        return largest_fitting(build, len(page), budget)[0]

    def search(
        self, request: KeyedSearchRequest, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> KeyedSearchResult:
        """The live keyed memories under ``request.namespace_prefix`` that match its filter:
        most similar first with a query (only those kept with an index), else newest first;
        ``offset`` and ``limit`` cut the page, and ``budget`` (bytes as Lambda carries the
        answer) cuts it further, saying how many it left out and the offset of the rest. Read in
        chunks, in bounded memory (``keyed.ranking``). ``StoreTooLarge`` past ``MAX_SCANNED``."""
        check_filter(request.filter)
        query = self._query_vector(request)
        now_ms = to_ms(self._clock.now())
        namespaces = [
            ns
            for ns, (_, expiry, _) in self._registered(now_ms).items()
            if expiry > now_ms and under_prefix(ns, request.namespace_prefix)
        ]
        self._check_size(namespaces)
        search = Search(self._redis, self._namespace_keys, now_ms, request.filter, query)
        best = search.best(namespaces, request.offset + request.limit)
        page = search.page(best[request.offset :])
        kept = self._fitting(page, request.offset, search.matched, budget)
        page = page[:kept]
        if request.refresh_ttl and page:
            page = self._refresh_page(page, now_ms)
        return _search_result(page, request.offset, request.limit, search.matched)

    @staticmethod
    def _fitting(page: list[Ranked], offset: int, matches: int, budget: int) -> int:
        """How many of ``page`` (the matches from ``offset``, of ``matches`` in all) the answer
        holds within ``budget`` bytes (``answers.largest_fitting``); at least one."""
        if not page:
            return 0
        limit = len(page)
        _, count = largest_fitting(
            lambda n: _search_result(page[:n], offset, limit, matches), limit, budget
        )
        return max(count, 1)

    def _query_vector(self, request: KeyedSearchRequest) -> NDArray[np.float32] | None:
        if request.query_vector is not None:
            vector = validate_vector(request.query_vector, self._store.dimensions, "query_vector")
            return unit(vector, "query_vector")
        if request.query is not None:
            if self._store.embed_provider == "none":
                raise EmbeddingRequired("query_vector")
            return unit(self._embedder.embed([request.query], "query")[0], "query")
        return None

    def _check_size(self, namespaces: Sequence[tuple[str, ...]]) -> None:
        """``StoreTooLarge`` when ``namespaces`` hold more than ``MAX_SCANNED`` entries (their
        sizes only: a search too wide is refused before it reads)."""
        if not namespaces:
            return
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            for namespace in namespaces:
                pipe.hlen(self._namespace_keys(namespace).items)
            held = sum(int(n) for n in pipe.execute())
        if held > MAX_SCANNED:
            raise StoreTooLarge(
                f"This search reads {held:,} keyed memories, more than the {MAX_SCANNED:,} "
                "one search may: give a longer namespace_prefix."
            )

    def _refresh_page(self, page: list[Ranked], now_ms: int) -> list[Ranked]:
        """``page`` after starting the expiry of each of its memories again from ``now_ms``."""
        by_namespace: dict[tuple[str, ...], list[Entry]] = {}
        for entry, _, _ in page:
            by_namespace.setdefault(tuple(entry.record.namespace), []).append(entry)
        fresh: dict[tuple[tuple[str, ...], str], float] = {}
        for namespace, entries in by_namespace.items():
            for key, expiry in self._refreshed(namespace, entries, now_ms).items():
                fresh[(namespace, key)] = expiry
        return [
            (entry, fresh.get((tuple(entry.record.namespace), entry.record.key), expiry), scores)
            for entry, expiry, scores in page
        ]
