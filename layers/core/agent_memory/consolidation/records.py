"""Where consolidation runs are kept: each run's record in its actor's slot
(``ActorKeys.consolidations``), the store-wide order and owner of run ids in the store's slot
(``StoreKeys.consolidations``, ``consolidation_actors``), and the actor's consolidation state
(``ActorKeys.consolidation``: new memories since the last run, the armed run, and the markers
of the steps applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from agent_memory.clock import to_ms
from agent_memory.consolidation.models import Consolidation, ConsolidationSummary
from agent_memory.database.client import database_errors
from agent_memory.database.keys import actor_bucket
from agent_memory.stores.database import StoreDatabase

SINCE = "since"
"""State field: new memories of the actor since its last consolidation run."""
ARMED = "armed"
"""State field: due time (ms) of the actor's armed automatic run (at most one is armed)."""
QUEUED = "queued"
"""State field: the id of the actor's run that is queued or running (at most one)."""
MAX_LISTED = 100
"""Runs one listing page may hold."""
SCAN_RUNS = 2_000
"""Runs a listing filtered by actor or status reads at most (newest first)."""


def step_marker(consolidation_id: str, index: int) -> str:
    """The state field that says step ``index`` of a run was applied (written by the step's
    own script, so a run done again never applies a step twice)."""
    return f"step:{consolidation_id}:{index}"


def revert_marker(consolidation_id: str) -> str:
    """The state field that says a run was reverted."""
    return f"revert:{consolidation_id}"


class ConsolidationRecords:
    """The consolidation runs of one store (``db``). Errors: ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        self._redis = db.client
        self._keys = db.keys

    def save(self, run: Consolidation, *, new: bool = False) -> None:
        """Write ``run``'s record; with ``new``, also enter it in the store's order."""
        actor = self._keys.actor(actor_bucket(run.actor_id))
        with database_errors():
            if new:
                pipe = self._redis.pipeline(transaction=False)
                pipe.zadd(self._keys.consolidations, {run.consolidation_id: to_ms(run.created_at)})
                pipe.hset(
                    self._keys.consolidation_actors,
                    run.consolidation_id,
                    actor_bucket(run.actor_id),
                )
                pipe.execute()
            self._redis.hset(actor.consolidations, run.consolidation_id, run.model_dump_json())

    def drop(self, run: Consolidation) -> None:
        """Remove ``run``'s record (a run queued by a request that lost the race to queue)."""
        actor = self._keys.actor(actor_bucket(run.actor_id))
        with database_errors():
            self._redis.hdel(actor.consolidations, run.consolidation_id)
            pipe = self._redis.pipeline(transaction=False)
            pipe.zrem(self._keys.consolidations, run.consolidation_id)
            pipe.hdel(self._keys.consolidation_actors, run.consolidation_id)
            pipe.execute()

    def load(self, consolidation_id: str, actor_id: str | None = None) -> Consolidation | None:
        """The run of that id (of ``actor_id`` when given, else of whichever actor the store's
        owner entry names), or None."""
        bucket = actor_bucket(actor_id) if actor_id is not None else self._owner(consolidation_id)
        if bucket is None:
            return None
        with database_errors():
            raw = self._redis.hget(self._keys.actor(bucket).consolidations, consolidation_id)
        return Consolidation.model_validate_json(cast(str, raw)) if raw else None

    def of_actor(self, actor_id: str) -> list[Consolidation]:
        """Every run of the actor, oldest first."""
        with database_errors():
            raw = self._redis.hvals(self._keys.actor(actor_bucket(actor_id)).consolidations)
        runs = [Consolidation.model_validate_json(cast(str, r)) for r in raw]
        return sorted(runs, key=lambda r: (r.created_at, r.consolidation_id))

    def page(
        self, offset: int, limit: int, actor_id: str | None, statuses: Sequence[str]
    ) -> tuple[list[ConsolidationSummary], int | None]:
        """A page of runs newest first (of ``actor_id``, of ``statuses`` when given) and the
        next page's offset (None on the last)."""
        if actor_id is not None:
            runs = [r.summary() for r in reversed(self.of_actor(actor_id))]
        else:
            with database_errors():
                ids = [str(i) for i in self._redis.zrevrange(self._keys.consolidations, 0, -1)]
            runs = self._summaries(ids[: SCAN_RUNS if statuses else offset + limit + 1])
        if statuses:
            runs = [r for r in runs if r.status in statuses]
        page = runs[offset : offset + limit]
        return page, (offset + limit if len(runs) > offset + limit else None)

    def _summaries(self, ids: Sequence[str]) -> list[ConsolidationSummary]:
        if not ids:
            return []
        with database_errors():
            buckets = self._redis.hmget(self._keys.consolidation_actors, list(ids))
            pipe = self._redis.pipeline(transaction=False)
            for run_id, bucket in zip(ids, buckets, strict=True):
                if bucket is not None:
                    pipe.hget(self._keys.actor(str(bucket)).consolidations, run_id)
            raws = pipe.execute()
        return [Consolidation.model_validate_json(r).summary() for r in raws if r]

    def _owner(self, consolidation_id: str) -> str | None:
        with database_errors():
            raw = self._redis.hget(self._keys.consolidation_actors, consolidation_id)
        return str(raw) if raw is not None else None

    def forget_actor(self, actor_id: str) -> int:
        """Forget the actor's runs and consolidation state (forgetting an actor); how many
        runs there were."""
        actor = self._keys.actor(actor_bucket(actor_id))
        with database_errors():
            ids = [str(i) for i in self._redis.hkeys(actor.consolidations)]
            self._redis.delete(actor.consolidations, actor.consolidation)
            if ids:
                pipe = self._redis.pipeline(transaction=False)
                pipe.zrem(self._keys.consolidations, *ids)
                pipe.hdel(self._keys.consolidation_actors, *ids)
                pipe.execute()
        return len(ids)
