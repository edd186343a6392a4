"""The use cases of consolidation (``agent_memory.consolidation``, docs/consolidation.md):
asking for an actor's run, the run itself (the background function), reading runs, applying,
discarding and reverting one, restoring a memory's version, and counting new memories towards
an automatic run.

Each checks what the calling key reaches first (``flows.reach``: another actor's run is a
stranger's 404), then counts usage (``consolidation_runs``, the model tokens, the memories
added and superseded) and tells the store's webhooks (``consolidation.proposed``,
``consolidation.completed``, ``consolidation.failed``; ``memory.created`` and
``memory.superseded`` for a restore).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.background.runs import RunBudget
from agent_memory.background.scheduler import ConsolidationTarget
from agent_memory.consolidation.models import (
    CONSOLIDATION_STATUSES,
    Consolidation,
    ConsolidationList,
    ConsolidationQueued,
)
from agent_memory.consolidation.triggers import note_new_memories
from agent_memory.errors import Conflict, ValidationFailed
from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.flows.quota import reserve
from agent_memory.memories.models import MemoryView
from agent_memory.memories.records import record_view
from agent_memory.observability import metrics
from agent_memory.webhooks.events import kept_events

if TYPE_CHECKING:
    from agent_memory.consolidation.runs import RunOutcome

NO_LANGUAGE_MODEL = (
    "This store has no language model (llm_provider is 'none'), so it cannot consolidate; set "
    "llm_provider and llm_model on the store first."
)


def queue_consolidation(store: StoreHandle, actor_id: str) -> ConsolidationQueued:
    """Queue a consolidation run of ``actor_id`` (an actor the key reaches, else
    ``Forbidden``), or answer the one already queued or running; ``Conflict`` for a store
    without a language model."""
    actor = reach.actor(store, actor_id)
    assert actor is not None
    if store.config.llm_provider == "none":
        raise Conflict(NO_LANGUAGE_MODEL)
    run = store.consolidation().queue(actor)
    return ConsolidationQueued(consolidation_id=run.consolidation_id, status=run.status)


def consolidation_list(
    store: StoreHandle, actor_id: str | None, status: str | None, offset: int, limit: int
) -> ConsolidationList:
    """A page of the store's runs, newest first, of ``actor_id`` (the key's actor when it is
    limited to one; a key limited to actors must name one it reaches), of ``status`` (one
    status or several, comma-separated) when given."""
    actor = reach.actor(store, actor_id)
    statuses = [s for s in (status or "").split(",") if s]
    unknown = [s for s in statuses if s not in CONSOLIDATION_STATUSES]
    if unknown:
        raise ValidationFailed(
            f"'{unknown[0]}' is not a status; use one of {', '.join(CONSOLIDATION_STATUSES)}.",
            details=[{"field": "query.status", "problem": "not a status"}],
        )
    runs, next_offset = store.consolidation().records.page(offset, limit, actor, statuses)
    return ConsolidationList(
        consolidations=runs, offset=offset, limit=limit, next_offset=next_offset
    )


def consolidation_view(store: StoreHandle, consolidation_id: str) -> Consolidation:
    """One run with its steps; ``ConsolidationNotFound`` for none or one of an actor the
    key does not reach."""
    return store.consolidation().get(consolidation_id, store.actors)


def apply_proposal(store: StoreHandle, consolidation_id: str) -> Consolidation:
    """Apply a proposed run (the steps that still hold), counted and told
    (``consolidation.completed``); ``Conflict`` when it is not proposed or no step holds."""
    outcome = store.consolidation().apply(consolidation_id, store.actors)
    _tell(store, outcome)
    assert outcome.run is not None
    return outcome.run


def discard_proposal(store: StoreHandle, consolidation_id: str) -> Consolidation:
    """Discard a proposed run; nothing changes. ``Conflict`` when it is not proposed."""
    return store.consolidation().discard(consolidation_id, store.actors)


def revert_run(store: StoreHandle, consolidation_id: str) -> Consolidation:
    """Undo an applied run in one step; ``Conflict`` naming the memories that changed since
    (nothing is reverted), or when the run is not applied. Told as ``memory.updated``-free:
    the run's record (``reverted``) says what changed."""
    outcome = store.consolidation().revert(consolidation_id, store.actors)
    assert outcome.run is not None
    return outcome.run


def restore_version(store: StoreHandle, memory_id: str) -> MemoryView:
    """Make a superseded or retired version current again as a new memory with its text and
    fields (``ConsolidationRuns.restore``), counted (``memories_added``, and
    ``memories_superseded`` when it replaced a current memory) and told (``memory.created``,
    ``memory.superseded``). ``MemoryNotFound`` for one the key does not reach, ``Conflict``
    for a current one."""
    reach.reachable_memory(store, memory_id)
    reserve(store, "memories", 1)
    record, closed = store.consolidation().restore(memory_id)
    view = record_view(record)
    if closed is not None:
        store.effects.count({"memories_superseded": 1})
    for event, data in kept_events(view, closed):
        store.effects.tell(event, data)
    return view


def run_consolidation(
    store: StoreHandle, target: ConsolidationTarget, budget: RunBudget
) -> dict[str, Any]:
    """The background run of ``target``'s actor (``ConsolidationRuns.run``), counted and
    told, then both sent (``StoreHandle.flush``); the run's id, status and counts."""
    outcome = store.consolidation(background=True).run(target.actor_id, budget)
    _tell(store, outcome, ran=outcome.run is not None and outcome.outcome in ("done", "failed"))
    store.flush()
    run = outcome.run
    metrics.add_metric(name="ConsolidationRuns", unit=MetricUnit.Count, value=1)
    return {
        "outcome": outcome.outcome,
        "consolidation_id": run.consolidation_id if run else None,
        "status": run.status if run else None,
        "model_calls": outcome.model_calls,
    }


def note_kept(store: StoreHandle, actor_id: str | None, kept: int) -> None:
    """Count ``kept`` new memories of ``actor_id`` towards its automatic run
    (``consolidation.triggers.note_new_memories``)."""
    if kept <= 0 or actor_id is None:
        return
    container = store.container
    target = ConsolidationTarget(store.instance_id, store.config.name, actor_id)
    note_new_memories(
        store.stores.client,
        store.config,
        actor_id,
        kept,
        lambda: container.scheduler,
        target,
        container.clock,
    )


def _tell(store: StoreHandle, outcome: RunOutcome, *, ran: bool = False) -> None:
    """Usage and webhook events of what ``outcome`` did (``ran``: a background run that
    planned or failed, counted in ``consolidation_runs``)."""
    run = outcome.run
    effects = store.effects
    effects.count(
        {
            "llm_input_tokens": outcome.input_tokens,
            "llm_output_tokens": outcome.output_tokens,
            "memories_added": outcome.kept,
            "memories_superseded": outcome.closed,
            "consolidation_runs": int(ran),
        }
    )
    if run is None or outcome.outcome not in ("done", "failed"):
        return
    data = {
        "consolidation_id": run.consolidation_id,
        "actor_id": run.actor_id,
        "status": run.status,
        "counts": run.counts.model_dump(mode="json"),
    }
    if run.status == "failed":
        effects.tell("consolidation.failed", {**data, "error": run.last_error})
    elif run.status == "proposed":
        effects.tell("consolidation.proposed", data)
    elif run.status == "applied":
        effects.tell("consolidation.completed", data)
