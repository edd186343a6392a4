"""The use cases of long-term memory: keeping a memory, changing and forgetting one, forgetting
an actor, reading one, listing and searching.

Each checks what the calling key reaches first (``flows.reach``), reserves the daily quota of
what it adds (``flows.quota``), and tells the store's webhooks and usage what it changed
(``StoreHandle.effects``), so that no route can keep or forget a memory without them.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.flows import reach
from agent_memory.flows.consolidation import note_kept
from agent_memory.flows.handle import StoreHandle
from agent_memory.flows.quota import reserve
from agent_memory.memories.models import (
    ActorForgotten,
    MemoryFilters,
    MemoryIn,
    MemoryList,
    MemoryPage,
    MemoryPatch,
    MemoryView,
    SearchRequest,
    SearchResult,
)
from agent_memory.observability import metrics
from agent_memory.webhooks.events import kept_events, updated_event


def keep_memory(store: StoreHandle, body: MemoryIn) -> tuple[MemoryView, bool]:
    """Keep a memory (True), or name the one the actor already has (False; ``duplicate``
    true in the view).

    The actor is the one the key may name (``reach.actor``); a ``supersedes`` of an actor the
    key does not reach is ``SupersededNotFound``; the memory counts towards the daily quota
    (and, when the store embeds it, needs a model token left today) before it is written. A new
    memory is told to the store's webhooks (``memory.created``, and ``memory.superseded`` for
    the one it replaced, also counted as ``memories_superseded``). Metrics ``MemoriesKept`` or
    ``MemoriesDeduplicated``, and ``Redactions``."""
    body = body.model_copy(update={"actor_id": reach.actor(store, body.actor_id)})
    if body.supersedes is not None:
        reach.reachable_superseded(store, body.supersedes)
    reserve(store, "memories", 1, embeds=body.vector is None)
    kept = store.memories.add(body)
    if not kept.duplicate:
        if kept.superseded is not None:
            store.effects.count({"memories_superseded": 1})
        for event, data in kept_events(kept.memory, kept.superseded):
            store.effects.tell(event, data)
        note_kept(store, kept.memory.actor_id, 1)
    name = "MemoriesDeduplicated" if kept.duplicate else "MemoriesKept"
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    for count in kept.redactions.values():
        metrics.add_metric(name="Redactions", unit=MetricUnit.Count, value=count)
    return kept.memory.model_copy(update={"duplicate": kept.duplicate}), not kept.duplicate


def change_memory(store: StoreHandle, memory_id: str, change: MemoryPatch) -> MemoryView:
    """Change a memory, keeping its previous state as a version (``Memories.patch``), told to
    the store's webhooks (``memory.updated`` with the memory as changed); ``MemoryNotFound``
    for one the key does not reach."""
    reach.reachable_memory(store, memory_id)
    changed = store.memories.patch(memory_id, change)
    store.effects.tell("memory.updated", updated_event(changed))
    return changed


def forget_memory(store: StoreHandle, memory_id: str) -> None:
    """Forget a memory and its whole chain, counted (``memories_deleted``) and told
    (``memory.deleted``); ``MemoryNotFound`` for one the key does not reach."""
    reach.reachable_memory(store, memory_id)
    store.memories.delete(memory_id)
    store.effects.count({"memories_deleted": 1})
    store.effects.tell("memory.deleted", {"memory_id": memory_id})


def forget_actor_memories(store: StoreHandle, actor_id: str) -> ActorForgotten:
    """Forget every memory of ``actor_id`` (an actor the key reaches, else ``Forbidden``), its
    profile and its consolidation runs; how many of each, the memories counted and told as one
    ``memory.deleted`` naming the actor and how many, the profile told as ``profile.updated``
    with no fields."""
    reach.actor(store, actor_id)
    deleted = store.memories.delete_actor(actor_id)
    fields = store.profiles.forget(actor_id)
    store.consolidation().records.forget_actor(actor_id)
    if deleted:
        store.effects.count({"memories_deleted": deleted})
        store.effects.tell("memory.deleted", {"actor_id": actor_id, "deleted": deleted})
    if fields:
        store.effects.tell("profile.updated", {"actor_id": actor_id, "fields": [], "by": "forget"})
    return ActorForgotten(actor_id=actor_id, deleted=deleted, profile_fields_deleted=fields)


def memory_view(store: StoreHandle, memory_id: str) -> MemoryView:
    """One memory with its versions and chain, within the answer's byte budget;
    ``MemoryNotFound`` for one that does not exist or that the key does not reach."""
    reach.reachable_memory(store, memory_id)
    return store.memories.get(memory_id, store.container.answer_budget_bytes)


def memory_list(store: StoreHandle, page: MemoryPage, filters: MemoryFilters) -> MemoryList:
    """A page of memories, newest first, among those ``filters`` select, of the actor the key
    may name (``reach.actor``), within the answer's byte budget."""
    page = MemoryPage(page.offset, page.limit, reach.actor(store, page.actor_id), page.type)
    return store.memories.listing(page, filters, store.container.answer_budget_bytes)


def memory_search(store: StoreHandle, request: SearchRequest) -> SearchResult:
    """The best memories for the query, of the actor the key may name (``reach.actor``),
    within the answer's byte budget; a read (``StoreHandle.read``)."""

    def search(store: StoreHandle) -> SearchResult:
        asked = request.model_copy(update={"actor_id": reach.actor(store, request.actor_id)})
        return store.memories.search_result(asked, store.container.answer_budget_bytes)

    return store.read(search)
