"""The long-term memories of one store, as callers use them: ``Memories``.

``Memories`` is made of collaborators with their own state, built together on one store:
``indexes`` (the actors' search indexes, kept in step with the database), ``store_level`` (the
store-level indexes and their upkeep), ``reader`` (get, page, count, search, recall, related)
and ``writer`` (add, supersede, patch, delete, forget an actor), which reads through
``reader``. It forwards each call to the one that owns it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
from numpy.typing import NDArray
from redis.client import Pipeline

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, largest_fitting, wire_bytes
from agent_memory.memories.indexes import ActorIndexes
from agent_memory.memories.models import (
    MemoryFilters,
    MemoryIn,
    MemoryList,
    MemoryPage,
    MemoryPatch,
    MemoryView,
    RecallRequest,
    SearchRequest,
    SearchResult,
)
from agent_memory.memories.queries import selection_of
from agent_memory.memories.reads import MemoryReader
from agent_memory.memories.records import StoredSource
from agent_memory.memories.reranking import Found
from agent_memory.memories.store_level import StoreLevel
from agent_memory.memories.writes import Kept, MemoryWriter
from agent_memory.providers.embeddings import Embedder
from agent_memory.providers.rerankers import Reranker
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import CURRENT, Selection
from agent_memory.stores.database import StoreDatabase


def fitted_page(page: MemoryList, offset: int, budget: int) -> MemoryList:
    """``page`` (which starts at ``offset``) with as many of its memories as keep it under
    ``budget`` bytes (``answers.wire_bytes``), at least one, and ``next_offset`` where the
    ones left out start: a listing pages by bytes as well as by count. One memory as a
    listing shows it always fits (``answers.MIN_ANSWER_BYTES``)."""

    def build(kept: int) -> MemoryList:
        if kept == len(page.memories):
            return page
        return page.model_copy(
            update={"memories": page.memories[:kept], "next_offset": offset + kept}
        )

    view, kept = largest_fitting(build, len(page.memories), budget)
    return view if kept or not page.memories else build(1)


def fitted_memory(view: MemoryView, budget: int) -> MemoryView:
    """``view`` (a memory as ``GET`` shows it) under ``budget`` bytes (``answers.wire_bytes``):
    the memories of its chain farthest from it go first (down to itself alone), then its
    oldest versions; ``chain_omitted`` and ``versions_omitted`` count them. Each count is 0
    when nothing was left out."""
    chain = view.chain or []
    versions = view.versions or []
    here = next((at for at, link in enumerate(chain) if link.id == view.id), 0)
    nearest = sorted(range(len(chain)), key=lambda at: (abs(at - here), at))

    def with_chain(kept: int) -> MemoryView:
        shown = sorted(nearest[: max(kept, 1)]) if chain else []
        return view.model_copy(
            update={
                "chain": [chain[at] for at in shown],
                "chain_omitted": len(chain) - len(shown),
                "versions_omitted": 0,
            }
        )

    fitted, kept = largest_fitting(with_chain, len(chain), budget)
    if kept > 1 or not versions or wire_bytes(fitted) <= budget:
        return fitted

    def with_versions(kept: int) -> MemoryView:
        return fitted.model_copy(
            update={"versions": versions[:kept], "versions_omitted": len(versions) - kept}
        )

    return largest_fitting(with_versions, len(versions), budget)[0]


class Memories:
    """The memories of one store. ``client`` and ``binary`` are clients of the store's
    database (text and bytes replies), ``embedder`` its embedding model, ``cache`` the
    container's index cache, shared by the stores whose ``cache_scope`` (the instance id)
    keeps their actors apart, ``reranker`` its reranker (or None). Errors: those of
    ``MemoryReader`` and ``MemoryWriter``."""

    def __init__(
        self,
        db: StoreDatabase,
        embedder: Embedder,
        cache: IndexCache,
        cache_scope: str,
        *,
        reranker: Reranker | None = None,
    ) -> None:
        self.db = db
        self.config = db.config
        self.client = db.client
        self.binary = db.binary
        self.store_keys = db.keys
        self.indexes = ActorIndexes(db, cache, cache_scope)
        self.store_level = StoreLevel(db)
        self.reader = MemoryReader(db, embedder, self.indexes, self.store_level, reranker)
        self.writer = MemoryWriter(db, self.reader, self.indexes, self.store_level)

    # --- reads -------------------------------------------------------------------------------

    @property
    def types(self) -> list[str]:
        """The memory types this store accepts."""
        return self.reader.types

    def check_types(self, memory_types: Sequence[str] | None, field: str = "types") -> None:
        """``MemoryReader.check_types``."""
        self.reader.check_types(memory_types, field)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """``MemoryReader.embed``: the store's embeddings of ``texts``."""
        return self.reader.embed(texts)

    def get(self, memory_id: str, budget: int = DEFAULT_ANSWER_BUDGET) -> MemoryView:
        """``MemoryReader.get``: one memory with its versions and chain, kept under ``budget``
        bytes (``fitted_memory``)."""
        return fitted_memory(self.reader.get(memory_id), budget)

    def count(self) -> int:
        """``MemoryReader.count``: live current memories of the store."""
        return self.reader.count()

    def page(
        self,
        offset: int,
        limit: int,
        actor_id: str | None,
        memory_type: str | None,
        selection: Selection = CURRENT,
    ) -> MemoryList:
        """``MemoryReader.page``: a page of memories, newest first."""
        return self.reader.page(offset, limit, actor_id, memory_type, selection)

    def listing(
        self,
        page: MemoryPage,
        filters: MemoryFilters,
        budget: int = DEFAULT_ANSWER_BUDGET,
    ) -> MemoryList:
        """A page of memories for a listing (``GET .../memories``): ``page``'s offset, limit,
        actor and type, among those ``filters`` select (``queries.selection_of``), cut to
        ``budget`` bytes (``fitted_page``)."""
        selection = selection_of(filters)
        found = self.reader.page(page.offset, page.limit, page.actor_id, page.type, selection)
        return fitted_page(found, page.offset, budget)

    def search(self, request: SearchRequest) -> list[MemoryView]:
        """``MemoryReader.search``: the best memories for a query, with scores."""
        return self.reader.search(request)

    def search_result(
        self, request: SearchRequest, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> SearchResult:
        """The answer of a search (``search``) kept under ``budget`` bytes
        (``answers.wire_bytes``): the lowest ranked results are left out as needed, and
        ``memories_omitted`` says how many."""
        result = self.reader.find(request)
        found, reranked = result.memories, result.reranked
        window = result.window_view

        def build(kept: int) -> SearchResult:
            return SearchResult(
                memories=found[:kept],
                memories_omitted=len(found) - kept,
                reranked=reranked,
                time_window=window,
            )

        return largest_fitting(build, len(found), budget)[0]

    def relevant(
        self,
        actor_id: str,
        text: str,
        request: RecallRequest,
        reference: datetime | None = None,
        generation: tuple[int, int] | None = None,
    ) -> Found:
        """``MemoryReader.relevant``: for recall, the actor's most relevant memories."""
        return self.reader.relevant(actor_id, text, request, reference, generation)

    def queue_generation(self, pipe: Pipeline, actor_id: str) -> None:
        """``MemoryReader.queue_generation``: the actor's generations, read by a recall with its
        session."""
        self.reader.queue_generation(pipe, actor_id)

    @staticmethod
    def generation_of(reply: Sequence[object]) -> tuple[int, int]:
        """``ActorIndexes.generation_of``."""
        return ActorIndexes.generation_of(reply)

    def related(self, actor_id: str | None, texts: Sequence[str], limit: int) -> list[MemoryView]:
        """``MemoryReader.related``: for extraction, the actor's memories related to texts."""
        return self.reader.related(actor_id, texts, limit)

    # --- writes ------------------------------------------------------------------------------

    def add(
        self, body: MemoryIn, source_session: str | None = None, *, memory_id: str | None = None
    ) -> Kept:
        """``MemoryWriter.add``: keep a memory (or name the one it duplicates)."""
        return self.writer.add(body, source_session, memory_id=memory_id)

    def add_many(
        self,
        bodies: Sequence[MemoryIn],
        sources: Sequence[StoredSource],
        memory_ids: Sequence[str],
    ) -> list[Kept]:
        """``MemoryWriter.add_many``: ``add`` of each, the texts embedded in one call."""
        return self.writer.add_many(bodies, sources, memory_ids)

    def patch(self, memory_id: str, change: MemoryPatch) -> MemoryView:
        """``MemoryWriter.patch``: change a memory, keeping its previous state as a version."""
        return self.writer.patch(memory_id, change)

    def delete(self, memory_id: str) -> None:
        """``MemoryWriter.delete``: forget a memory and its whole chain."""
        self.writer.delete(memory_id)

    def delete_actor(self, actor_id: str) -> int:
        """``MemoryWriter.delete_actor``: forget every memory of an actor; how many."""
        return self.writer.delete_actor(actor_id)
