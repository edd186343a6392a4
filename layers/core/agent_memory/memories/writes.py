"""Long-term memory, the write path: keep (redacted, embedded, deduplicated), supersede, change
and forget (``MemoryWriter``, one of the collaborators of ``service.Memories``).

Storage (``database.keys.ActorKeys``): one actor's memories share a hash tag, so every write is one
Lua script on one slot (``scripts``) that also bumps the actor's generation and appends to its
change log; the store-level indexes (listing, counts, owner of an id: ``store_level``) follow in a
second step on the store's slots. Records are ``memories.records.MemoryRecord``; vectors are kept as
unit-length float32 bytes.

Deduplication uses the actor's index (``indexes``) under an optimistic check: the add script
refuses to write when the actor's generation moved since the index was read, and the add
retries against the fresh index, so two concurrent adds of the same text cannot both be kept.

Memories that change: a memory body may name, in ``supersedes``, a current memory of the same
actor that it replaces. One script (``scripts.SUPERSEDE``) keeps the new memory and closes the
old one (``valid_until``, ``superseded_by``) together, on the actor's slot, and only if the old
one is still current and unchanged since it was read: there is never a moment with neither or
both current, and of concurrent supersedes of one memory exactly one is kept. A superseding
memory is not deduplicated (it is meant to replace a named memory; see ``docs/design.md``,
"Memories that change").
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from redis.typing import EncodableT

from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys, actor_bucket, actor_tag
from agent_memory.database.scripts import load_script, script_then
from agent_memory.errors import (
    AlreadySuperseded,
    Conflict,
    MemoryNotFound,
    StoreNotFound,
    SupersedeActorMismatch,
    SupersededNotFound,
)
from agent_memory.memories.forms import converted
from agent_memory.memories.indexes import ActorIndexes
from agent_memory.memories.models import (
    MAX_TOPIC_CHARS,
    MAX_VERSIONS,
    MemoryIn,
    MemoryPatch,
    MemoryView,
)
from agent_memory.memories.reads import MemoryReader, unit
from agent_memory.memories.records import (
    MemoryRecord,
    StoredSource,
    StoredVersion,
    decode_record,
    encode_memory,
    record_facts,
    record_json,
    record_view,
    split_memory,
)
from agent_memory.memories.redaction import redact
from agent_memory.memories.scripts import LOG_KEEP, PUT, READ_ONE, REMOVE_CHAIN, SUPERSEDE
from agent_memory.memories.store_level import StoreLevel
from agent_memory.search.columns import Known
from agent_memory.search.index import ActorIndex
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.registry import current_entry

DEDUPE_EPSILON = 1e-6
"""Float32 cosine of two vectors whose true cosine is exactly the threshold can land a hair
below it; this tolerance keeps "exactly at the threshold is a duplicate" true."""
ADD_ATTEMPTS = 12
"""How many times a write is tried again when the actor's memories (or the memory superseded)
changed between its read and its script; from the third attempt on, each waits a random moment
first (``_back_off``), so that a write racing a burst of others (an extraction keeping several
memories of the actor) lets the burst pass instead of losing to each of its writes."""
BACK_OFF_SECONDS = 0.003
"""The most a retried write waits, per attempt already made (so at most about 30 ms in all)."""


def _back_off(attempt: int) -> None:
    """Wait before attempt ``attempt`` (0-based) of an optimistic write: not before the first
    two, then a random moment of up to ``BACK_OFF_SECONDS`` per attempt made ("full jitter",
    https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/, linear here)."""
    if attempt >= 2:
        time.sleep(random.uniform(0, BACK_OFF_SECONDS * attempt))


def new_memory_id(bucket: str) -> str:
    """``mem_``, the actor bucket's tag (``database.keys.actor_tag``, 4 hex digits) and 16 random
    hex digits (64 bits): opaque, unique, path-safe, and naming the actor's tag, so that the memory
    needs no owner entry (``database/keys.py``)."""
    return "mem_" + actor_tag(bucket) + secrets.token_hex(8)


@dataclass
class Kept:
    """What ``MemoryWriter.add`` did: the memory kept (the new one, or the one it duplicates)."""

    memory: MemoryView
    duplicate: bool
    redactions: dict[str, int]
    superseded: str | None = None
    """The id of the memory this one replaced (closed in the same step), if any."""
    supersede_refused: str | None = None
    """``add_many`` only: the error code of a ``supersedes`` that could not be honoured (the
    memory was kept as a plain add instead)."""


class MemoryWriter:
    """Writing the memories of one store. It reads what a write needs through ``reader`` and
    keeps the store-level indexes through ``store_level``; the actors' warm indexes are
    ``indexes``. Errors: ``MemoryNotFound``, ``ValidationFailed`` (and its ``VectorInvalid`` /
    ``EmbeddingRequired``), the supersede errors, ``Conflict``, ``StoreNotFound``, provider
    errors from the embedder, ``DatabaseUnavailable``."""

    def __init__(
        self,
        db: StoreDatabase,
        reader: MemoryReader,
        indexes: ActorIndexes,
        store_level: StoreLevel,
    ) -> None:
        client, binary = db.client, db.binary
        self._redis = client
        self._binary = binary
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._reader = reader
        self._indexes = indexes
        self._store_level = store_level
        self._put = load_script(binary, PUT)
        self._supersede_script = load_script(binary, SUPERSEDE)
        self._read_one = load_script(binary, READ_ONE)
        self._remove_chain = load_script(client, REMOVE_CHAIN)

    def add(
        self, body: MemoryIn, source_session: str | None = None, *, memory_id: str | None = None
    ) -> Kept:
        """Keep a memory, unless the actor already has a current one at least
        ``dedupe_threshold`` similar (cosine), in which case that one is returned with
        ``duplicate`` true. With ``body.supersedes``, keep it and close the memory it names in
        one step (``_supersede``; never deduplicated): ``SupersededNotFound`` (404) when that
        memory is not kept, ``SupersedeActorMismatch`` (409) when it is another actor's,
        ``AlreadySuperseded`` (409) when it is not current; nothing is kept then.

        The text is redacted first when the store's ``redact_pii`` is on; the vector is the
        body's (checked against ``dimensions``) or the store's embedding of the redacted text.
        ``memory_id`` chooses the id (background extraction derives it from what it read): a
        memory already kept under it is returned with ``duplicate`` true and nothing changes.
        """
        self._reader.check_type(body.type)
        if memory_id is not None:
            existing = self._reader.fetch(actor_bucket(body.actor_id), [memory_id]).get(memory_id)
            if existing is not None:
                return Kept(existing, True, {})
        text, topics, counts = self._redacted(body)
        vector = self._reader.vector(text, body.vector, "vector")
        source = StoredSource(session_id=source_session) if source_session else None
        return self._keep(body, text, topics, counts, vector, source, memory_id)

    def add_many(
        self,
        bodies: Sequence[MemoryIn],
        sources: Sequence[StoredSource],
        memory_ids: Sequence[str],
    ) -> list[Kept]:
        """``add`` of each body under the id and with the source at the same position
        (background extraction), in order, so each is deduplicated against the ones before it
        too; the texts (redacted) of bodies without a vector are embedded in one batched call.
        A body whose ``supersedes`` cannot be honoured (the memory is gone, another actor's, or
        was superseded meanwhile) is kept as a plain add instead, and its ``Kept`` says so
        (``supersede_refused``): a model's stale suggestion must not lose the memory. Other
        errors as ``add``."""
        for body in bodies:
            self._reader.check_type(body.type)
        kept: dict[int, Kept] = {}
        for at, (body, memory_id) in enumerate(zip(bodies, memory_ids, strict=True)):
            existing = self._reader.fetch(actor_bucket(body.actor_id), [memory_id]).get(memory_id)
            if existing is not None:
                kept[at] = Kept(existing, True, {})
        todo = [at for at in range(len(bodies)) if at not in kept]
        redacted = {at: self._redacted(bodies[at]) for at in todo}
        to_embed = [at for at in todo if bodies[at].vector is None]
        embedded = self._reader.embed([redacted[at][0] for at in to_embed]) if to_embed else None
        row = {at: n for n, at in enumerate(to_embed)}
        for at in todo:
            body = bodies[at]
            text, topics, counts = redacted[at]
            if body.vector is None and embedded is not None:
                vector = unit(embedded[row[at]], "vector")
            else:
                vector = self._reader.vector(text, body.vector, "vector")
            try:
                kept[at] = self._keep(
                    body, text, topics, counts, vector, sources[at], memory_ids[at]
                )
            except (SupersededNotFound, SupersedeActorMismatch, AlreadySuperseded) as exc:
                plain = body.model_copy(update={"supersedes": None})
                done = self._keep(plain, text, topics, counts, vector, sources[at], memory_ids[at])
                done.supersede_refused = exc.code
                kept[at] = done
        return [kept[at] for at in range(len(bodies))]

    def _redacted(self, body: MemoryIn) -> tuple[str, list[str], dict[str, int]]:
        """The body's text and topics as they are kept (personal identifiers replaced when the
        store's ``redact_pii`` is on) and the replacements made, by kind."""
        if not self._store.redact_pii:
            return body.text, body.topics, {}
        redaction = redact(body.text, card_digit_runs=self._store.redact_card_digit_runs)
        counts = dict(redaction.counts)
        return redaction.text, self._redact_topics(body.topics, counts), counts

    def _keep(
        self,
        body: MemoryIn,
        text: str,
        topics: list[str],
        counts: dict[str, int],
        vector: NDArray[np.float32],
        source: StoredSource | None,
        memory_id: str | None,
    ) -> Kept:
        """The write of ``add`` once the text is redacted and the vector known (unit length):
        dedupe, store-level entries, the script, the store check and the warm index."""
        bucket = actor_bucket(body.actor_id)
        actor = self._keys.actor(bucket)
        now = self._clock.now()
        now_ms = to_ms(now)
        expires_ms = to_ms(now + timedelta(seconds=self._store.memory_ttl_seconds))
        mode = "once" if memory_id is not None else "new"
        memory_id = memory_id or new_memory_id(bucket)
        # The body's fields by name (memories.forms), with what the add decides: the id, the
        # redacted text and topics, the times and the source.
        record = converted(
            body,
            MemoryRecord,
            id=memory_id,
            text=text,
            topics=topics,
            created_at=now_ms,
            updated_at=now_ms,
            expires_at=expires_ms,
            source=source,
            valid_from=now_ms,
        )
        if body.supersedes is not None:
            return self._supersede(record, vector, counts, mode, bucket)
        # The store-level entries go first: a forget-actor racing this add then either sees the
        # memory (and removes both) or not (and removes neither), so counts stay exact. With
        # the actor's index warm here, they go in the same round trip as the write, just before
        # it, and the write's generation check stands in for reading the generation first.
        index = self._indexes.warm(bucket)
        indexed = index is None
        known_gen = (
            self._store_level.index(memory_id, bucket, now_ms, expires_ms) if indexed else None
        )
        stored = encode_memory(record, vector.tobytes())
        try:
            for attempt in range(ADD_ATTEMPTS):
                _back_off(attempt)
                if index is None:
                    index = self._indexes.index(bucket, known_gen)
                    known_gen = None
                gen, found = self._already_kept(index, bucket, vector, record, counts)
                if found is not None:
                    if found.duplicate and indexed:
                        self._store_level.unindex(memory_id)
                    return found
                before = None
                if not indexed:
                    before = self._store_level.commands(memory_id, bucket, now_ms, expires_ms)
                    indexed = True
                with database_errors():
                    (written, new_gen), registered = script_then(
                        self._binary,
                        self._put,
                        actor.all(),
                        [memory_id, stored, gen, LOG_KEEP, mode],
                        lambda pipe: pipe.hget(StoreKeys.registry, self._store.name),
                        before=before,
                    )
                if int(written) == -2:  # kept meanwhile under this chosen id: leave it be
                    kept = self._reader.fetch(bucket, [memory_id]).get(memory_id)
                    if kept is not None:
                        return Kept(kept, True, counts)
                    continue
                if int(written) == 1:
                    self._check_store_still_here(bucket, memory_id, registered)
                    self._apply_own_write(index, gen, int(new_gen), record, vector, stored)
                    return Kept(record_view(record), False, counts)
                index = None  # the generation moved: catch up and check again
        except BaseException:
            if indexed:
                self._store_level.unindex(memory_id)
            raise
        self._store_level.unindex(memory_id)
        raise Conflict("The actor's memories kept changing during this add; retry.")

    @staticmethod
    def _apply_own_write(
        index: ActorIndex,
        gen: int,
        new_gen: int,
        record: MemoryRecord,
        vector: NDArray[np.float32],
        stored: bytes,
    ) -> None:
        """Put the memory just written (``stored``: as ``encode_memory`` wrote it) into the warm
        ``index`` when nothing else changed the actor since ``gen`` (no catch-up read later)."""
        with index.lock:
            if index.gen == gen:
                index.upsert(
                    record.id,
                    vector,
                    record.text,
                    record.type,
                    record.created_at,
                    record.expires_at,
                    Known.one(None, record_facts(record), split_memory(stored)[0]),
                )
                index.gen = new_gen

    def _already_kept(
        self,
        index: ActorIndex,
        bucket: str,
        vector: NDArray[np.float32],
        record: MemoryRecord,
        counts: dict[str, int],
    ) -> tuple[int, Kept | None]:
        """The index's generation, and what ``record`` (not written yet) is already: itself,
        written by an earlier attempt of this add and seen again (not a duplicate); a memory of
        the actor at least ``dedupe_threshold`` similar (a duplicate); or None (new). Scores
        from a compact index are rescored exactly first."""
        with index.lock:
            candidates = index.best_match(vector, record.created_at)
            gen, exact = index.gen, index.exact
        if not exact:
            candidates = self._indexes.rescore(bucket, candidates, vector)
        best = candidates[0] if candidates else None
        if best is None:
            return gen, None
        if best.memory_id == record.id:
            return gen, Kept(record_view(record), False, counts)  # our own write, seen again
        if best.score >= self._store.dedupe_threshold - DEDUPE_EPSILON:
            kept = self._reader.fetch(bucket, [best.memory_id]).get(best.memory_id)
            if kept is not None:
                return gen, Kept(kept, True, counts)
        return gen, None

    def _supersede(
        self,
        record: MemoryRecord,
        vector: NDArray[np.float32],
        counts: dict[str, int],
        mode: str,
        bucket: str,
    ) -> Kept:
        """Keep ``record`` and close the memory it supersedes in one step (``SUPERSEDE``), then
        take the closed one out of the store's listing of current memories (``RETIRE``).

        The new memory's store-level entries go first, as for an add, and are taken back when
        nothing is kept. The old record is read, checked (kept, current) and closed here; the
        script writes only if it is still exactly what was read, so a concurrent change of it
        (a PATCH, another supersede) is never overwritten: the step is tried again against the
        new state, and a memory superseded meanwhile is ``AlreadySuperseded``."""
        old_id = record.supersedes
        assert old_id is not None
        actor = self._keys.actor(bucket)
        now_ms = record.created_at
        self._store_level.index(record.id, bucket, now_ms, record.expires_at)
        kept = False
        stored = encode_memory(record, vector.tobytes())
        try:
            for attempt in range(ADD_ATTEMPTS):
                _back_off(attempt)
                with database_errors():
                    raw_old = self._binary.hget(actor.memories, old_id)
                if raw_old is None:
                    raise self._not_supersedable(old_id, bucket)
                old = decode_record(cast(bytes, raw_old), old_id, bucket)
                if old.expires_at <= now_ms:
                    raise SupersededNotFound(old_id)
                if not old.current:
                    raise AlreadySuperseded(old_id, old.superseded_by)
                closed = old.model_copy(
                    update={"valid_until": now_ms, "superseded_by": record.id, "updated_at": now_ms}
                )
                args: list[EncodableT] = [
                    record.id,
                    stored,
                    old_id,
                    cast(bytes, raw_old),
                    record_json(closed),
                    LOG_KEEP,
                    mode,
                ]
                with database_errors():
                    (written, new_gen), registered = script_then(
                        self._binary,
                        self._supersede_script,
                        actor.all(),
                        args,
                        lambda pipe: pipe.hget(StoreKeys.registry, self._store.name),
                    )
                written = int(written)
                if written == -2:  # kept meanwhile under this chosen id: leave it be
                    existing = self._reader.fetch(bucket, [record.id]).get(record.id)
                    if existing is not None:
                        kept = True
                        return Kept(existing, True, counts)
                    continue
                if written == -3:
                    raise self._not_supersedable(old_id, bucket)
                if written == 1:
                    kept = True
                    self._check_store_still_here(bucket, record.id, registered)
                    self._store_level.retire(old_id)
                    index = self._indexes.warm(bucket)
                    if index is not None:
                        with index.lock:
                            if index.gen == int(new_gen) - 2:  # only our two changes since
                                facts = record_facts(record)
                                index.upsert(
                                    record.id,
                                    vector,
                                    record.text,
                                    record.type,
                                    now_ms,
                                    record.expires_at,
                                    Known.one(None, facts, split_memory(stored)[0]),
                                )
                                index.close(old_id, now_ms)
                                index.gen = int(new_gen)
                    return Kept(record_view(record), False, counts, superseded=old_id)
                # -1 (changed since read) or -4 (closed meanwhile): read it again
            raise Conflict(f"Memory '{old_id}' kept changing during this supersede; retry.")
        finally:
            if not kept:
                self._store_level.unindex(record.id)

    def _not_supersedable(self, old_id: str, bucket: str) -> Exception:
        """Why ``old_id``, absent from the actor's memories, cannot be superseded: it is
        another actor's live memory (``SupersedeActorMismatch``), or there is none
        (``SupersededNotFound``)."""
        owner = self._store_level.owners([old_id]).get(old_id)
        if owner is not None and owner != bucket and self._store_level.live([old_id]):
            return SupersedeActorMismatch(old_id)
        return SupersededNotFound(old_id)

    def _redact_topics(self, topics: list[str], counts: dict[str, int] | None) -> list[str]:
        """The topics with personal identifiers replaced (when ``redact_pii``), adding what
        was found to ``counts``. Topics are short keywords, but a model or a client may put an
        address in one. ``metadata`` is the client's own structured data and is kept as sent."""
        if not self._store.redact_pii:
            return topics
        redacted = []
        for topic in topics:
            found = redact(topic, card_digit_runs=self._store.redact_card_digit_runs)
            redacted.append(found.text[:MAX_TOPIC_CHARS])
            if counts is not None:
                for kind, n in found.counts.items():
                    counts[kind] = counts.get(kind, 0) + n
        return redacted

    def _check_store_still_here(self, bucket: str, memory_id: str, raw: str | bytes | None) -> None:
        """After a write: if the store was deleted meanwhile (or deleted and created again),
        take the write back, so no text outlives its store's DELETE. ``raw`` is the store's
        registry entry read right after the write (None when it is gone)."""
        now = current_entry(raw, self._store)
        if now is None:
            self._store_level.forget(bucket, [memory_id])
            raise StoreNotFound(self._store.name)
        if (now.get("dimensions"), now.get("embed_model")) != (
            self._store.dimensions,
            self._store.embed_model,
        ):
            # The store was given another embedding space while this memory was embedded: its
            # vector would be found by nothing, and would block the next change as "not empty".
            self._store_level.forget(bucket, [memory_id])
            raise Conflict(
                "The store's dimensions or embedding model changed while this memory was being "
                "kept; it was not kept. Add it again."
            )

    def patch(self, memory_id: str, change: MemoryPatch) -> MemoryView:
        """Change a memory's text, type, topics, metadata or importance; the previous state is
        kept as a version (newest first, at most ``MAX_VERSIONS``). A new text is redacted and
        embedded again (or takes ``vector``). Its expiry does not move, and neither do its place
        in a chain and its ``valid_from`` / ``valid_until``: the change is written only if the
        actor's generation is still the one the record was read at (else it is made again on
        the fresh record), so a supersede racing it is never undone."""
        bucket = self._reader.owner(memory_id)
        given = change.model_dump(exclude_unset=True)
        if "type" in given:
            self._reader.check_type(change.type or "")
        new_text = None
        if change.text is not None:
            new_text = (
                redact(change.text, card_digit_runs=self._store.redact_card_digit_runs).text
                if self._store.redact_pii
                else change.text
            )
        if given.get("topics") is not None and self._store.redact_pii:
            given["topics"] = self._redact_topics(given["topics"], None)
        editable = ("type", "topics", "metadata", "importance")
        changed: dict[str, Any] = {f: given[f] for f in editable if f in given}
        fields = ("text", "type", "topics", "metadata", "importance")
        actor = self._keys.actor(bucket)
        embedded: NDArray[np.float32] | None = None
        for attempt in range(ADD_ATTEMPTS):
            _back_off(attempt)
            with database_errors():
                gen, raw, blob = self._read_one(keys=actor.all(), args=[memory_id])
            if raw is None:
                raise MemoryNotFound(memory_id)
            record = decode_record(cast(bytes, raw), memory_id, bucket)
            blob = split_memory(cast(bytes, raw))[1] or blob
            now_ms = to_ms(self._clock.now())
            version = StoredVersion(
                text=record.text,
                type=record.type,
                topics=record.topics,
                metadata=record.metadata,
                importance=record.importance,
                changed_at=now_ms,
            )
            text = new_text if new_text is not None else record.text
            text_changed = text != record.text
            record = record.model_copy(update={**changed, "text": text})
            if all(getattr(record, f) == getattr(version, f) for f in fields) and (
                change.vector is None
            ):
                return record_view(record, with_versions=True)  # nothing changes: no version
            versions = [version, *record.versions][:MAX_VERSIONS]
            record = record.model_copy(update={"updated_at": now_ms, "versions": versions})
            if text_changed or change.vector is not None:
                if embedded is None:
                    embedded = self._reader.vector(text, change.vector, "vector")
                vector = embedded
            elif blob is not None:
                vector = np.frombuffer(cast(bytes, blob), dtype=np.float32)
            else:
                raise MemoryNotFound(memory_id)
            with database_errors():
                written, _ = self._put(
                    keys=actor.all(),
                    args=[
                        memory_id,
                        encode_memory(record, vector.tobytes()),
                        int(gen),
                        LOG_KEEP,
                        "update",
                    ],
                )
            if int(written) == 1:
                return record_view(record, with_versions=True)
            if int(written) == -1:
                raise MemoryNotFound(memory_id)  # deleted while this change was being made
        raise Conflict("The actor's memories kept changing during this change; retry.")

    def delete(self, memory_id: str) -> None:
        """Forget one memory and its whole chain (``REMOVE_CHAIN``): every memory it replaced
        and every memory that replaced it, in one step; ``MemoryNotFound`` when there is none
        (or it expired)."""
        bucket = self._reader.owner(memory_id)
        with database_errors():
            removed = [
                str(i)
                for i in self._remove_chain(
                    keys=self._keys.actor(bucket).all(), args=[LOG_KEEP, memory_id]
                )
            ]
        self._store_level.unindex(*removed)
        if not removed:
            raise MemoryNotFound(memory_id)

    def delete_actor(self, actor_id: str) -> int:
        """Forget every memory of ``actor_id`` (a data-protection request); returns how many."""
        bucket = actor_bucket(actor_id)
        actor = self._keys.actor(bucket)
        with database_errors():
            ids = [str(i) for i in self._redis.hkeys(actor.memories)]
        live = self._store_level.live(ids)
        for start in range(0, len(ids), 500):
            self._store_level.forget(bucket, ids[start : start + 500])
        return len(live)
