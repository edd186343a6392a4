"""The writes of consolidation, each one atomic step on the actor's slot (``scripts.SWITCH``):
a plan's step (merge, update, drop), the revert of a whole run, and the restore of a version.

Every change goes through the supersede rules (docs/design.md, "Memories that change"): a
replaced memory is closed (``valid_until``, ``superseded_by``), never deleted, so it stays
readable with ``include_superseded``, ``as_of`` and its chain. A merge's new memory
``supersedes`` the first memory it replaces; every memory it replaces names it in
``superseded_by``. A drop closes its memory with no successor. The store-level indexes follow
in a second step, as for a supersede: the new memory's entries first, the closed memories'
``RETIRE`` (or a reopened one's ``REOPEN``) after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from numpy.typing import NDArray
from redis.typing import EncodableT

from agent_memory.clock import from_ms, to_ms
from agent_memory.consolidation.models import Consolidation, ConsolidationStep
from agent_memory.consolidation.records import revert_marker, step_marker
from agent_memory.consolidation.scripts import REOPEN, SWITCH, switch_keys
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys, actor_bucket, actor_tag
from agent_memory.database.scripts import load_script
from agent_memory.errors import Conflict, StoreNotFound
from agent_memory.memories.records import (
    MemoryRecord,
    StoredSource,
    decode_record,
    encode_memory,
    record_json,
    split_memory,
)
from agent_memory.memories.scripts import LOAD_CHAIN, LOG_KEEP
from agent_memory.memories.service import Memories
from agent_memory.memories.writes import new_memory_id
from agent_memory.stores.registry import current_entry

CHAIN_MOST = 200
"""Memories of a chain a restore reads on each side of the version it brings back."""


def step_memory_id(incarnation: str, consolidation_id: str, index: int, bucket: str) -> str:
    """The id of the memory step ``index`` of a run writes: derived from the store's
    incarnation, the run and the step (a run done again writes the same id, never a second
    memory) and carrying the actor's tag (``database.keys.actor_tag``)."""
    seed = "\x00".join(["consolidation", incarnation, consolidation_id, str(index)])
    return "mem_" + actor_tag(bucket) + hashlib.sha256(seed.encode()).hexdigest()[:16]


@dataclass
class Switch:
    """One atomic step: memories to write new (``new``: id -> whole stored memory), memories
    to change (``changed``: id -> (raw as read, new record)), and what the store-level indexes
    do after: ``retire`` (closed now), ``reopen`` (current again)."""

    new: dict[str, tuple[MemoryRecord, bytes]] = field(default_factory=dict)
    changed: dict[str, tuple[bytes, MemoryRecord]] = field(default_factory=dict)
    retire: list[str] = field(default_factory=list)
    reopen: list[MemoryRecord] = field(default_factory=list)


@dataclass
class Refused:
    """Why a switch wrote nothing: ``code`` -1 (a memory changed since read), -2 (the new id
    is kept already), -3 (a memory is gone), with the id concerned."""

    code: int
    memory_id: str


class StepWriter:
    """The atomic writes of consolidation for one store's ``memories``. Errors:
    ``StoreNotFound`` (the store was deleted during the step: its new memory is taken back),
    ``DatabaseUnavailable``."""

    def __init__(self, memories: Memories) -> None:
        db = memories.db
        self._memories = memories
        self._binary = db.binary
        self._client = db.client
        self._keys = db.keys
        self._store = db.config
        self._clock = db.clock
        self._switch = load_script(db.binary, SWITCH)
        self._reopen = load_script(db.client, REOPEN)
        self._chain = load_script(db.binary, LOAD_CHAIN)

    # --- reading ---------------------------------------------------------------------------

    def read(self, bucket: str, ids: Sequence[str]) -> dict[str, tuple[bytes, MemoryRecord]]:
        """The stored memories of ``ids`` kept for ``bucket``: raw bytes and record."""
        if not ids:
            return {}
        with database_errors():
            raws = self._binary.hmget(self._keys.actor(bucket).memories, list(ids))
        return {
            i: (cast(bytes, raw), decode_record(cast(bytes, raw), i, bucket))
            for i, raw in zip(ids, raws, strict=True)
            if raw is not None
        }

    def current(self, bucket: str) -> list[tuple[MemoryRecord, NDArray[np.float32] | None]]:
        """Every current, live memory of the actor with its vector (None when it has none)."""
        now = to_ms(self._clock.now())
        actor = self._keys.actor(bucket)
        with database_errors():
            raws = cast(dict[bytes, bytes], self._binary.hgetall(actor.memories))
        found = []
        for key, raw in raws.items():
            record = decode_record(raw, key.decode(), bucket)
            if not record.current or record.expires_at <= now:
                continue
            blob = split_memory(raw)[1]
            vector = np.frombuffer(blob, dtype=np.float32) if blob else None
            found.append((record, vector))
        found.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
        return found

    # --- a plan's step ---------------------------------------------------------------------

    def apply(
        self,
        run: Consolidation,
        step: ConsolidationStep,
        vector: NDArray[np.float32] | None,
    ) -> str | None:
        """Apply ``step`` of ``run`` (``vector``: the new text's, for merge and update) in one
        step; None when done (or done before), else why not: a memory of the step is gone,
        no longer current or changed since the plan read it (a conflict; nothing written)."""
        bucket = actor_bucket(run.actor_id)
        marker = step_marker(run.consolidation_id, step.index)
        with database_errors():
            done = self._client.hexists(self._keys.actor(bucket).consolidation, marker)
        if done:  # applied by an earlier try (cut short before its record was saved)
            return None
        read = self.read(bucket, [m.id for m in step.before])
        now_ms = to_ms(self._clock.now())
        for shown in step.before:
            got = read.get(shown.id)
            if got is None or got[1].expires_at <= now_ms:
                return f"memory '{shown.id}' is gone"
            if not got[1].current:
                return f"memory '{shown.id}' was replaced meanwhile"
            if got[1].updated_at != to_ms(shown.updated_at):
                return f"memory '{shown.id}' changed meanwhile"
        switch = Switch()
        successor = None
        if step.after is not None and vector is not None:
            first = read[step.before[0].id][1]
            successor = MemoryRecord(
                id=step.after.id,
                text=step.after.text,
                type=step.after.type,
                topics=step.after.topics,
                metadata=first.metadata,
                importance=max(
                    (r.importance for _, r in read.values() if r.importance is not None),
                    default=None,
                ),
                created_at=now_ms,
                updated_at=now_ms,
                expires_at=to_ms(self._clock.now()) + self._store.memory_ttl_seconds * 1000,
                source=StoredSource(consolidation_id=run.consolidation_id),
                occurred_at=first.occurred_at,
                valid_from=now_ms,
                supersedes=first.id,
            )
            switch.new[successor.id] = (successor, encode_memory(successor, vector.tobytes()))
        for shown in step.before:
            raw, record = read[shown.id]
            closed = record.model_copy(
                update={
                    "valid_until": now_ms,
                    "superseded_by": successor.id if successor is not None else None,
                    "updated_at": now_ms,
                }
            )
            switch.changed[shown.id] = (raw, closed)
            switch.retire.append(shown.id)
        refused = self.write(bucket, switch, marker)
        if refused is None:
            if step.after is not None:
                step.after.updated_at = from_ms(now_ms)
            return None
        if refused.code == -2:  # written by an earlier try of this run: done
            return None
        return f"memory '{refused.memory_id}' changed meanwhile"

    # --- undo ------------------------------------------------------------------------------

    def revert(self, run: Consolidation) -> list[str]:
        """Undo every applied step of ``run`` in one step: each memory the run wrote is closed
        (no successor, no link back) and each memory it replaced or retired is current again.
        Returns the ids whose state changed since the run (then nothing is written): a result
        changed, replaced or forgotten, or a replaced memory restored or forgotten."""
        bucket = actor_bucket(run.actor_id)
        steps = [s for s in run.steps if s.status == "applied"]
        ids = [m.id for s in steps for m in s.before] + [s.after.id for s in steps if s.after]
        read = self.read(bucket, ids)
        now_ms = to_ms(self._clock.now())
        changed: list[str] = []
        switch = Switch()
        for step in steps:
            after = step.after
            if after is not None:
                got = read.get(after.id)
                if (
                    got is None
                    or not got[1].current
                    or got[1].updated_at != got[1].created_at
                    or got[1].expires_at <= now_ms
                ):
                    changed.append(after.id)
                else:
                    raw, record = got
                    closed = record.model_copy(
                        update={"valid_until": now_ms, "supersedes": None, "updated_at": now_ms}
                    )
                    switch.changed[after.id] = (raw, closed)
                    switch.retire.append(after.id)
            for shown in step.before:
                got = read.get(shown.id)
                expected = after.id if after is not None else None
                if got is None or got[1].current or got[1].superseded_by != expected:
                    changed.append(shown.id)
                    continue
                raw, record = got
                opened = record.model_copy(
                    update={"valid_until": None, "superseded_by": None, "updated_at": now_ms}
                )
                switch.changed[shown.id] = (raw, opened)
                switch.reopen.append(opened)
        if changed:
            return changed
        refused = self.write(bucket, switch, revert_marker(run.consolidation_id))
        return [refused.memory_id] if refused is not None else []

    def restore(self, bucket: str, memory_id: str) -> tuple[MemoryRecord, str | None] | None:
        """Bring back version ``memory_id`` (not current) as a new current memory with its
        text and fields, superseding the chain's current memory (or, when the chain has none:
        its last version was retired by a drop, linking from that one). Returns the new record
        and the id it closed (None when nothing was current); None when the version is
        current (nothing to restore). ``Conflict`` when the chain kept changing."""
        actor = self._keys.actor(bucket)
        for _ in range(8):
            with database_errors():
                ids, raws = self._chain(keys=actor.all(), args=[memory_id, CHAIN_MOST])
            chain = [(str(i, "utf-8") if isinstance(i, bytes) else str(i)) for i in ids]
            if memory_id not in chain:
                return None
            records = {
                i: (cast(bytes, raw), decode_record(cast(bytes, raw), i, bucket))
                for i, raw in zip(chain, raws, strict=True)
            }
            version = records[memory_id][1]
            if version.current:
                return None
            last = chain[-1]
            raw_last, tail = records[last]
            now_ms = to_ms(self._clock.now())
            blob = split_memory(records[memory_id][0])[1]
            if blob is None:
                with database_errors():
                    blob = cast(bytes | None, self._binary.hget(actor.vectors, memory_id))
            if blob is None:
                return None
            restored = version.model_copy(
                update={
                    "id": new_memory_id(bucket),
                    "created_at": now_ms,
                    "updated_at": now_ms,
                    "expires_at": now_ms + self._store.memory_ttl_seconds * 1000,
                    "source": StoredSource(restored_from=memory_id),
                    "versions": [],
                    "terms": None,
                    "valid_from": now_ms,
                    "valid_until": None,
                    "supersedes": last,
                    "superseded_by": None,
                }
            )
            closes = tail.current
            update: dict[str, object] = {"superseded_by": restored.id, "updated_at": now_ms}
            if closes:
                update["valid_until"] = now_ms
            switch = Switch(
                new={restored.id: (restored, encode_memory(restored, blob))},
                changed={last: (raw_last, tail.model_copy(update=update))},
                retire=[last] if closes else [],
            )
            if self.write(bucket, switch, "") is None:
                return restored, (last if closes else None)
        raise Conflict(
            f"The chain of memory '{memory_id}' kept changing during the restore; retry."
        )

    # --- the one write ---------------------------------------------------------------------

    def write(self, bucket: str, switch: Switch, marker: str) -> Refused | None:
        """``switch`` as one ``SWITCH`` (marked done by ``marker``, '' for none), between its
        store-level steps; None when written (or the marker says it was), else why not."""
        level = self._memories.store_level
        for record, _ in switch.new.values():
            level.index(record.id, bucket, record.created_at, record.expires_at)
        args: list[EncodableT] = [LOG_KEEP, marker, len(switch.new) + len(switch.changed)]
        order = list(switch.new) + list(switch.changed)
        for memory_id, (_, stored) in switch.new.items():
            args += [memory_id, b"", stored]
        for memory_id, (raw, record) in switch.changed.items():
            args += [memory_id, raw, record_json(record)]
        keep_entries = False
        try:
            with database_errors():
                code, at = self._switch(keys=switch_keys(self._keys.actor(bucket)), args=args)
                registered = self._client.hget(StoreKeys.registry, self._store.name)
            # -2: the new id is kept already (an earlier try wrote it): its entries stay.
            keep_entries = int(code) >= 0 or int(code) == -2
            if int(code) < 0:
                return Refused(int(code), order[int(at) - 1])
        finally:
            if not keep_entries:
                level.unindex(*switch.new)
        if switch.new and current_entry(registered, self._store) is None:
            level.forget(bucket, list(switch.new))
            raise StoreNotFound(self._store.name)
        if switch.retire:
            level.retire(*switch.retire)
        for record in switch.reopen:
            part = self._keys.memory_partition(record.id)
            with database_errors():
                self._reopen(
                    keys=[part.memories, part.memory_expiry, part.memories_superseded],
                    args=[record.id, record.created_at],
                )
        return None
