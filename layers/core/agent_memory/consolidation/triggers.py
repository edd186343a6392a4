"""When an actor's consolidation runs by itself: after ``consolidate_after_memories`` new
memories since its last run (a store setting; 0: only when asked for), armed like extraction,
as one EventBridge Scheduler one-shot per actor (``background.scheduler.ConsolidationTarget``,
a deterministic name) at most once until the run it arms clears it.

Light on purpose: the routes that keep memories load this, not the run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import redis

from agent_memory.background.scheduler import ConsolidationTarget, Scheduler
from agent_memory.clock import Clock, to_ms
from agent_memory.consolidation.records import ARMED, SINCE
from agent_memory.database.client import database_errors
from agent_memory.database.keys import actor_bucket
from agent_memory.errors import AgentMemoryError
from agent_memory.observability import logger
from agent_memory.stores.models import StoreConfig

AUTO_DELAY_SECONDS = 60
"""An automatic run is armed this long after the memory that crossed the threshold, so that
the rest of a burst (an extraction keeping several memories) is in it."""


def note_new_memories(
    client: redis.Redis,
    store: StoreConfig,
    actor_id: str | None,
    kept: int,
    scheduler: Callable[[], Scheduler],
    target: ConsolidationTarget | None,
    clock: Clock,
) -> bool:
    """Count ``kept`` new memories of ``actor_id`` and, when that makes
    ``consolidate_after_memories`` since its last run (and the store has a language model),
    arm its run once (True). Nothing for memories of no actor or a threshold of 0.
    ``scheduler`` gives the scheduler, built only when a run is armed (a function without
    scheduler settings can keep memories of a store that never arms one). A scheduler failure
    is logged and the arming released, never raised: the memories are kept."""
    threshold = store.consolidate_after_memories
    if kept <= 0 or actor_id is None or threshold == 0 or store.llm_provider == "none":
        return False
    state = store.keys().actor(actor_bucket(actor_id)).consolidation
    due = clock.now() + timedelta(seconds=AUTO_DELAY_SECONDS)
    with database_errors():
        since = int(client.hincrby(state, SINCE, kept))
        if since < threshold or not client.hsetnx(state, ARMED, to_ms(due)):
            return False
    if target is None:
        return False
    try:
        scheduler().arm(target, due)
    except AgentMemoryError as exc:
        with database_errors():
            client.hdel(state, ARMED)
        logger.error("could not arm the consolidation schedule: %s", exc.message)
        return False
    return True
