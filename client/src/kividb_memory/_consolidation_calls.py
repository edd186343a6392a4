"""The requests of consolidation (docs/consolidation.md): queue a run of an actor, read runs,
apply, discard or revert one, and restore a memory's version; built like the others of
``kividb_memory._http`` (one ``Call`` each, sent by either client)."""

from __future__ import annotations

from collections.abc import Sequence

from kividb_memory import models as m
from kividb_memory._http import Call, idempotency_key, query, segment


def consolidate(store: str, actor_id: str, key: str | None = None) -> Call[m.ConsolidationQueued]:
    path = f"{store}/actors/{segment('actor_id', actor_id)}/consolidate"
    return Call("POST", path, m.ConsolidationQueued, True, idempotency_key=idempotency_key(key))


def list_consolidations(
    store: str,
    actor_id: str | None,
    status: str | Sequence[str] | None,
    offset: int | None,
    limit: int | None,
) -> Call[m.ConsolidationList]:
    """``status``: one status or several (sent comma-separated)."""
    statuses = status if status is None or isinstance(status, str) else ",".join(status)
    params = query(actor_id=actor_id, status=statuses, offset=offset, limit=limit)
    return Call("GET", f"{store}/consolidations", m.ConsolidationList, True, params=params)


def _run_path(store: str, consolidation_id: str) -> str:
    return f"{store}/consolidations/{segment('consolidation_id', consolidation_id)}"


def get_consolidation(store: str, consolidation_id: str) -> Call[m.Consolidation]:
    return Call("GET", _run_path(store, consolidation_id), m.Consolidation, True)


def decide(
    store: str, consolidation_id: str, verb: str, key: str | None = None
) -> Call[m.Consolidation]:
    """``verb``: ``apply``, ``discard`` or ``revert``; each is sent with an idempotency key,
    so a retry after a lost answer does not answer 409 for the run it already changed."""
    path = f"{_run_path(store, consolidation_id)}/{verb}"
    return Call("POST", path, m.Consolidation, True, idempotency_key=idempotency_key(key))


def restore_memory(store: str, memory_id: str, key: str | None = None) -> Call[m.MemoryView]:
    path = f"{store}/memories/{segment('memory_id', memory_id)}/restore"
    return Call("POST", path, m.MemoryView, True, idempotency_key=idempotency_key(key))
