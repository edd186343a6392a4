"""Reading one store's long-term memories: get, page, count, search, recall and the related
memories extraction reads.

``MemoryReader`` is one of the collaborators of ``service.Memories``: the writer
(``writes.MemoryWriter``) asks it for what a write reads first (the owner of an id, records,
the store's types, a text's vector), and both keep the store-level indexes up through
``store_level.StoreLevel`` (a page prunes expired memories and takes a superseded record out of
the listing of current ones). Reads never take the optimistic generation check: they rank
``indexes.ActorIndexes`` snapshots (``ranking``) and fetch the records ranked.

Reads show current memories unless a ``Selection`` asks for others (``include_superseded``,
``as_of``). A search without ``actor_id`` reads every actor's index and is bounded
(``STORE_WIDE_MAX_BYTES``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import cast

import numpy as np
from numpy.typing import NDArray
from redis.client import Pipeline

from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.keys import actor_bucket
from agent_memory.database.partitions import counted, live_count, merged_window, queue_count
from agent_memory.database.scripts import load_script
from agent_memory.errors import MemoryNotFound, StoreTooLarge, ValidationFailed, VectorInvalid
from agent_memory.memories.indexes import ActorIndexes
from agent_memory.memories.models import MemoryList, MemoryView, RecallRequest, SearchRequest
from agent_memory.memories.queries import selection_of
from agent_memory.memories.ranking import rank, within
from agent_memory.memories.records import (
    MemoryRecord,
    decode_record,
    record_link,
    record_view,
    split_memory,
)
from agent_memory.memories.reranking import Found, apply_reranker
from agent_memory.memories.scripts import LOAD_CHAIN
from agent_memory.memories.store_level import StoreLevel
from agent_memory.models import RESERVED_TYPES
from agent_memory.providers.embeddings import Embedder, EmbedPurpose, validate_vector
from agent_memory.providers.rerankers import Reranker
from agent_memory.search.query import Query
from agent_memory.search.scores import DEFAULT_MIN_SCORE
from agent_memory.search.selection import CURRENT, Selection
from agent_memory.search.when import time_window
from agent_memory.stores.database import StoreDatabase

RELATED_TEXT_CHARS = 2000
"""A message longer than this is cut before it is embedded to find related memories (about 500
tokens; providers refuse single inputs past 8,192 tokens)."""
MAX_CHAIN_SHOWN = 50
"""``GET`` of a memory shows at most this many memories of its chain on each side of it."""
STORE_WIDE_MAX_BYTES = 128 * 1024 * 1024
"""A search (or a filtered listing) without ``actor_id`` reads every live memory's vector of
the store into the container's index cache (256 MB by default): it is refused (409
``store_too_large``) beyond half of that, 87,381 memories of 384 dimensions, 21,845 of 1,536
(docs/limits.md)."""


def unit(vector: NDArray[np.float32], field: str = "vector") -> NDArray[np.float32]:
    """``vector`` scaled to length 1 (cosine then is a dot product), computed in float64 so
    that very large or very small finite values neither overflow nor vanish."""
    wide = vector.astype(np.float64)
    scale = float(np.max(np.abs(wide))) if wide.size else 0.0
    if scale == 0.0 or not np.isfinite(scale):
        raise VectorInvalid(
            f"'{field}' must be finite and not all zeros.",
            details=[{"field": field, "problem": "must be finite and not all zeros"}],
        )
    wide /= scale
    return (wide / np.linalg.norm(wide)).astype(np.float32)


class MemoryReader:
    """Reading the memories of one store. ``reranker``: the store's, for searches and recalls
    (``memories.reranking``), or None. Errors:
    ``MemoryNotFound``, ``ValidationFailed`` (and its ``VectorInvalid`` / ``EmbeddingRequired``),
    ``StoreTooLarge``, provider errors from the embedder, ``DatabaseUnavailable``."""

    def __init__(
        self,
        db: StoreDatabase,
        embedder: Embedder,
        indexes: ActorIndexes,
        store_level: StoreLevel,
        reranker: Reranker | None = None,
    ) -> None:
        binary = db.binary
        self._reranker = reranker
        self._redis = db.client
        self._binary = binary
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._embedder = embedder
        self._indexes = indexes
        self._store_level = store_level
        self._load_chain = load_script(binary, LOAD_CHAIN)

    # --- the store's types and vectors -------------------------------------------------------

    @property
    def types(self) -> list[str]:
        """The memory types this store accepts."""
        return [*RESERVED_TYPES, *(t.name for t in self._store.custom_types)]

    def check_types(self, memory_types: Sequence[str] | None, field: str = "types") -> None:
        """``ValidationFailed`` (naming ``field``) unless each is one of the store's types."""
        for memory_type in memory_types or ():
            self.check_type(memory_type, field)

    def check_type(self, memory_type: str, field: str = "type") -> None:
        """``ValidationFailed`` (naming ``field``) unless ``memory_type`` is one of the
        store's types."""
        if memory_type not in self.types:
            allowed = ", ".join(self.types)
            raise ValidationFailed(
                f"Type '{memory_type}' is not one of this store's types: {allowed}.",
                details=[{"field": field, "problem": f"must be one of: {allowed}"}],
            )

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The store's embeddings of ``texts`` as memories (one batched provider call where it
        can), rows in input order; ``EmbeddingRequired`` when the store has no embedding
        model."""
        return self._embedder.embed(texts)

    def vector(
        self,
        text: str,
        given: Sequence[float] | None,
        field: str,
        purpose: EmbedPurpose = "document",
    ) -> NDArray[np.float32]:
        """The unit-length vector of ``text``: ``given`` (checked against the store's
        dimensions; ``VectorInvalid`` names ``field``) or the store's embedding of ``text``
        for ``purpose`` (a memory, or a query: ``providers.embeddings.EmbedPurpose``)."""
        if given is not None:
            return unit(validate_vector(given, self._store.dimensions, field), field)
        return unit(self._embedder.embed([text], purpose)[0], field)

    # --- reading -----------------------------------------------------------------------------

    def owner(self, memory_id: str) -> str:
        """The actor bucket of a live memory (``store_level.find_owners``); ``MemoryNotFound``
        otherwise."""
        bucket = self._store_level.owners([memory_id]).get(memory_id)
        if bucket is None or not self._store_level.live([memory_id]):
            raise MemoryNotFound(memory_id)
        return bucket

    def records(self, bucket: str, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The live records of ``ids`` (current or not) in the actor's memories."""
        if not ids:
            return {}
        return self._live(bucket, self._read_stored(bucket, ids), to_ms(self._clock.now()))

    def _read_stored(self, bucket: str, ids: Sequence[str]) -> dict[str, bytes]:
        """The stored memories of ``ids`` that exist, by id (one ``HMGET``)."""
        with database_errors():
            raws = cast(
                list[bytes | None], self._binary.hmget(self._keys.actor(bucket).memories, list(ids))
            )
        return {memory_id: raw for memory_id, raw in zip(ids, raws, strict=True) if raw}

    @staticmethod
    def _live(bucket: str, stored: dict[str, bytes], now_ms: int) -> dict[str, MemoryRecord]:
        """The records of ``stored`` (a stored memory or its JSON, by id) not expired at
        ``now_ms``."""
        found = {}
        for memory_id, raw in stored.items():
            record = decode_record(raw, memory_id, bucket)
            if record.expires_at > now_ms:
                found[memory_id] = record
        return found

    def _ranked_views(self, bucket: str, ids: Sequence[str], now_ms: int) -> dict[str, MemoryView]:
        """Views of the live records of ``ids``, as the actor's index holds them (the state it
        ranked: no round trip), and for those it does not hold (read from a kept index, or
        closed since), as read now, which the index then holds."""
        index = self._indexes.warm(bucket)
        stored: dict[str, bytes] = {}
        if index is not None:
            with index.lock:
                held = {memory_id: index.record_of(memory_id) for memory_id in ids}
            stored = {memory_id: raw for memory_id, raw in held.items() if raw is not None}
        missing = [memory_id for memory_id in ids if memory_id not in stored]
        if missing:
            read = {
                i: split_memory(raw)[0] for i, raw in self._read_stored(bucket, missing).items()
            }
            if index is not None:
                with index.lock:
                    index.hold_missing(read)
            stored.update(read)
        return {i: record_view(r) for i, r in self._live(bucket, stored, now_ms).items()}

    def fetch(self, bucket: str, ids: Sequence[str]) -> dict[str, MemoryView]:
        """Views of ``records``."""
        return {i: record_view(r) for i, r in self.records(bucket, ids).items()}

    def get(self, memory_id: str) -> MemoryView:
        """One memory, current or not, with its versions (newest first) and its ``chain``: the
        live memories it replaced and that replaced it, oldest first, itself included (at most
        ``MAX_CHAIN_SHOWN`` on each side), read in one step (``LOAD_CHAIN``)."""
        bucket = self.owner(memory_id)
        with database_errors():
            ids, raws = self._load_chain(
                keys=self._keys.actor(bucket).all(), args=[memory_id, MAX_CHAIN_SHOWN]
            )
        now_ms = to_ms(self._clock.now())
        chain = [
            decode_record(raw, memory.decode(), bucket)
            for memory, raw in zip(ids, raws, strict=True)
        ]
        found = [r for r in chain if r.id == memory_id]
        if not found:
            raise MemoryNotFound(memory_id)
        view = record_view(found[0], with_versions=True)
        links = [record_link(r) for r in chain if r.expires_at > now_ms]
        return view.model_copy(update={"chain": links})

    def count(self) -> int:
        """Number of live current memories in the store (superseded ones are not counted): the
        live ones less the live superseded ones, summed over the partitions (one pipeline).
        Exact whenever no write is half done; during a supersede, whose new memory and whose
        retired one are in two partitions written one after the other, it may count one
        memory more for that moment."""
        now_ms = to_ms(self._clock.now())
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            queue_count(pipe, self._keys, now_ms)
            return counted(pipe.execute())

    def page(
        self,
        offset: int,
        limit: int,
        actor_id: str | None,
        memory_type: str | None,
        selection: Selection = CURRENT,
    ) -> MemoryList:
        """A page of live memories, newest first (by ``created_at``), optionally one actor's
        and one type's, among those ``selection`` admits (current ones by default), with
        ``total``, how many memories those filters match over all pages (without filters,
        the store's ``count``). Filters apply before the page is cut."""
        if memory_type is not None:
            self.check_type(memory_type)
            selection = replace(selection, types=(memory_type,))
        for wanted in selection.types or ():
            self.check_type(wanted, "type")
        # (skipped while the database refuses writes: expired ones are skipped)
        self._store_level.prune()
        if actor_id is None and selection == CURRENT:
            return self._current_page(offset, limit)
        if actor_id is None:
            self._check_store_wide("listing with these filters")
        buckets = [actor_bucket(actor_id)] if actor_id is not None else self._store_level.buckets()
        now_ms = to_ms(self._clock.now())
        # The actors' indexes (kept in step, ``indexes``) say which memories the selection
        # admits and when each was made; only the page's records are read. (Reading every
        # record would read every vector too: they are kept inside the records.)
        picked: list[tuple[int, str, str]] = []
        for bucket in buckets:
            index = self._indexes.index(bucket)
            with index.lock:
                chosen = index.selected(now_ms, selection)
            picked += [(created, memory_id, bucket) for created, memory_id in chosen]
        picked.sort(reverse=True)
        window = picked[offset : offset + limit]
        by_bucket: dict[str, list[str]] = {}
        for _, memory_id, bucket in window:
            by_bucket.setdefault(bucket, []).append(memory_id)
        found: dict[str, MemoryRecord] = {}
        for bucket, ids in by_bucket.items():
            found.update(self.records(bucket, ids))
        page = [record_view(found[i]) for _, i, _ in window if i in found]
        return MemoryList(
            memories=page,
            next_offset=offset + limit if len(picked) > offset + limit else None,
            total=len(picked),
        )

    def _current_page(self, offset: int, limit: int) -> MemoryList:
        """The store-wide page of current memories, from the store's listing of them (its partitions
        merged, ``database.partitions.merged_window``). A record found superseded there (a supersede
        whose second step has not run, or never ran) is left out and taken out of the listing
        (``RETIRE``, unless the database refuses writes), so the records are the truth and the
        listing follows them."""
        with database_errors():
            ids = merged_window(
                self._redis, [p.memories for p in self._keys.memory_partitions()], offset, limit + 1
            )
            owners = self._store_level.owners(ids[:limit])
        total = self.count()
        by_bucket: dict[str, list[str]] = {}
        for memory_id in ids[:limit]:
            owner = owners.get(memory_id)
            if owner is not None:
                by_bucket.setdefault(owner, []).append(memory_id)
        found: dict[str, MemoryRecord] = {}
        for bucket, members in by_bucket.items():
            found.update(self.records(bucket, members))
        stale = [i for i, r in found.items() if not r.current]
        if stale:
            with unless_writes_refused():
                self._store_level.retire(*stale)
        page = [record_view(found[i]) for i in ids[:limit] if i in found and found[i].current]
        return MemoryList(
            memories=page, next_offset=offset + limit if len(ids) > limit else None, total=total
        )

    def _check_store_wide(self, what: str) -> None:
        """``StoreTooLarge`` when a ``what`` without ``actor_id``, which reads every actor's
        memories into the index cache, would read more vectors than ``STORE_WIDE_MAX_BYTES``
        (live memories x dimensions x 4 bytes): such a store is searched actor by actor."""
        most = STORE_WIDE_MAX_BYTES // (self._store.dimensions * 4)
        held = live_count(self._redis, self._keys, to_ms(self._clock.now()))
        if held > most:
            raise StoreTooLarge(
                f"A {what} without actor_id reads every memory of the store, and this store "
                f"holds {held:,}: at most {most:,} of {self._store.dimensions} dimensions are "
                "read at once. Pass actor_id."
            )

    # --- search ------------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> list[MemoryView]:
        """``find``'s memories."""
        return self.find(request).memories

    def find(self, request: SearchRequest) -> Found:
        """The best ``limit`` memories for the query, each with its ``score``.

        ``semantic`` ranks by cosine, ``keyword`` by BM25, ``hybrid`` fuses both, each result
        scored on [0, 1] (``memories.ranking``, ``search.scores``); then the
        store's reranker, if any and unless ``request.rerank`` is false, orders the best
        ``rerank_candidates`` of that ranking (``_found``). Without ``actor_id`` every actor's
        memories are searched; with it, only that actor's. Only current memories unless
        ``include_superseded`` or ``as_of`` (``search.selection``); the filters apply before
        the top ``limit`` is cut.
        """
        for memory_type in request.types or []:
            self.check_type(memory_type, "types")
        if request.actor_id is None:
            self._check_store_wide("search")
        query_vector = None
        if request.mode != "keyword":
            query_vector = self.vector(request.query, request.query_vector, "query_vector", "query")
        buckets = (
            [actor_bucket(request.actor_id)]
            if request.actor_id is not None
            else self._store_level.buckets()
        )
        window = time_window(request.query, request.reference_time or self._clock.now())
        selection = selection_of(request.filters, request.types)
        if window is not None and request.time_filter:
            selection = within(selection, window)
        ranked_window = window if request.time_ranking else None
        query = Query(request.query, request.mode, query_vector, ranked_window)
        found = self._found(
            buckets,
            query,
            request.limit,
            selection,
            rerank=request.rerank,
            min_score=request.min_score,
        )
        return Found(found.memories, found.reranked, window)

    def relevant(
        self,
        actor_id: str,
        text: str,
        request: RecallRequest,
        reference: datetime | None = None,
        generation: tuple[int, int] | None = None,
    ) -> Found:
        """For recall: the actor's current memories (of ``request.types``, when given) most
        relevant to the query ``text`` (hybrid when the store can embed or
        ``request.query_vector`` is given; keyword otherwise), at most ``request.limit``,
        reranked as ``find`` reranks (unless ``request.rerank`` is false) and cut at
        ``request.min_score``, the time the query names resolved against ``reference`` (now
        when None) as ``find`` does (``request.time_filter`` keeps only that time's).
        ``generation``: the actor's ``(gen, kept)`` when the caller has just read them
        (``queue_generation``)."""
        types = request.types
        for memory_type in types or []:
            self.check_type(memory_type, "types")
        vector = None
        if request.query_vector is not None or self._store.embed_provider != "none":
            vector = self.vector(text, request.query_vector, "query_vector", "query")
        window = time_window(text, reference or self._clock.now())
        selection = Selection(types=tuple(types) if types else None)
        if window is not None and request.time_filter:
            selection = within(selection, window)
        bucket = actor_bucket(actor_id)
        known = {bucket: generation} if generation is not None else None
        query = Query(text, "hybrid" if vector is not None else "keyword", vector, window)
        return self._found(
            [bucket],
            query,
            request.limit,
            selection,
            known,
            rerank=request.rerank,
            min_score=request.min_score,
        )

    def queue_generation(self, pipe: Pipeline, actor_id: str) -> None:
        """Queue the read of the actor's generations (``ActorIndexes.queue_generation``), for a
        recall that reads them with the session, in one round trip."""
        self._indexes.queue_generation(pipe, actor_bucket(actor_id))

    def related(self, actor_id: str | None, texts: Sequence[str], limit: int) -> list[MemoryView]:
        """For extraction: the actor's current memories most related to ``texts`` (the unread
        messages), at most ``limit``. Each text is a query of a hybrid search (its embedding,
        one batched call for all, each text cut to ``RELATED_TEXT_CHARS``, and its words); a
        memory ranks by its best place over the texts, then by its best score. Nothing is
        embedded when the actor has no current memory. Errors: the embedder's."""
        bucket = actor_bucket(actor_id)
        now_ms = to_ms(self._clock.now())
        index = self._indexes.index(bucket)
        with index.lock:
            held = index.count(now_ms, CURRENT)
        queries = [text for text in texts if text.strip()]
        if held == 0 or not queries:
            return []
        vectors = self.embed([text[:RELATED_TEXT_CHARS] for text in queries])
        best: dict[str, tuple[int, float, str]] = {}
        for text, row in zip(queries, vectors, strict=True):
            vector = unit(row, "vector")
            ranked = rank(
                self._indexes, [bucket], Query(text, "hybrid", vector), limit, CURRENT, now_ms
            )
            for place, item in enumerate(ranked):
                key = (place, -item.hit.score, item.hit.memory_id)
                if item.hit.memory_id not in best or key < best[item.hit.memory_id]:
                    best[item.hit.memory_id] = key
        picked = [memory_id for memory_id, _ in sorted(best.items(), key=lambda kv: kv[1])]
        found = self.fetch(bucket, picked[:limit])
        return [found[i] for i in picked[:limit] if i in found and found[i].valid_until is None]

    def _found(
        self,
        buckets: Sequence[str],
        query: Query,
        limit: int,
        selection: Selection,
        generations: dict[str, tuple[int, int]] | None = None,
        *,
        rerank: bool,
        min_score: float | None,
    ) -> Found:
        """``_rank``'s best ``limit``; with the store's reranker (and ``rerank``), the best
        ``rerank_candidates`` (at least ``limit``) of ``_rank`` ordered by it
        (``memories.reranking.apply_reranker``, which keeps this order when it fails). Then
        those scoring below ``min_score`` (``search.scores.DEFAULT_MIN_SCORE`` when None) are
        left out."""
        floor = DEFAULT_MIN_SCORE if min_score is None else min_score
        ranking = partial(self._rank, buckets, query, selection=selection, generations=generations)
        if self._reranker is None or not rerank:
            found = Found(ranking(limit))
        else:
            candidates = ranking(max(limit, self._store.rerank_candidates))
            found = apply_reranker(self._reranker, query.text, candidates, limit)
        kept = [m for m in found.memories if m.score is not None and m.score >= floor]
        return Found(kept, found.reranked, query.window)

    def _rank(
        self,
        buckets: Sequence[str],
        query: Query,
        limit: int,
        selection: Selection,
        generations: dict[str, tuple[int, int]] | None = None,
    ) -> list[MemoryView]:
        """``memories.ranking.rank`` over the indexes, then the views of the memories ranked. The
        ranking is of the indexes' state at the generation each read (one moment per actor):
        a memory current then is shown as the index holds it (``_ranked_views``; a record the
        index does not hold is read a moment later and may say it was superseded since: its
        ``valid_until`` shows it), so a search racing a supersede shows the old memory or the
        new one, never neither and never both."""
        now_ms = to_ms(self._clock.now())
        ranked = rank(self._indexes, buckets, query, limit, selection, now_ms, generations)
        by_bucket: dict[str, list[str]] = {}
        for item in ranked:
            by_bucket.setdefault(item.bucket, []).append(item.hit.memory_id)
        found: dict[str, MemoryView] = {}
        for bucket, ids in by_bucket.items():
            found.update(self._ranked_views(bucket, ids, now_ms))
        return [
            found[r.hit.memory_id].model_copy(
                update={
                    "score": round(r.hit.score, 6),
                    "similarity": round(r.similarity, 6) if r.similarity is not None else None,
                }
            )
            for r in ranked
            if r.hit.memory_id in found
        ]
