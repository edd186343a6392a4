"""A consolidation run put in a store by hand (the isolation and scoped-key matrices probe
runs that exist; making one through a run needs a language model those stores do not have)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from agent_memory.consolidation.models import Consolidation, new_consolidation_id
from agent_memory.consolidation.records import ConsolidationRecords
from agent_memory.database.keys import StoreKeys, actor_bucket
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import STORED
from tests.support.databases import database_client


def seed_run(redis_url: str, store: str, actor_id: str) -> str:
    """A ``proposed`` run of ``actor_id`` with no steps, kept in ``store`` of the database at
    ``redis_url`` as a run would keep it; its id."""
    client = database_client(redis_url)
    raw = client.hget(StoreKeys.registry, store)
    assert raw is not None, store
    config = StoreConfig.model_validate_json(raw, context=STORED)
    run = Consolidation(
        consolidation_id=new_consolidation_id(actor_bucket(actor_id)),
        actor_id=actor_id,
        status="proposed",
        trigger="request",
        mode="review",
        created_at=datetime.now(UTC),
    )
    ConsolidationRecords(SimpleNamespace(client=client, keys=config.keys())).save(run, new=True)  # type: ignore[arg-type]
    return run.consolidation_id
