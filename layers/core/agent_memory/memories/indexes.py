"""Actor indexes kept in step with Redis: built in batches, caught up from the change log.

Search runs in this process on an ``ActorIndex`` (``search.index``) held in the container's bounded
``IndexCache`` and kept in step by generation: every write of an actor's memories bumps the
actor's generation and logs ``<gen>:<op>:<id>`` (``scripts``). A search reads the
actor's generation (one small read) and, when it moved, only the log entries since the cached
generation and the rows they name; a cache further behind than the log reaches reloads the
actor. So every container sees every write, however it was made, at its next read.
"""

from __future__ import annotations

import gc
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from redis.client import Pipeline

from agent_memory.database.client import database_errors, unless_writes_refused
from agent_memory.database.keys import ActorKeys
from agent_memory.database.scripts import load_script
from agent_memory.memories.kept_codes import KeptCodes
from agent_memory.memories.records import (
    F,
    raw_facts,
    raw_facts_if_any,
    raw_record_and_json,
    split_memory,
    stored_terms,
)
from agent_memory.memories.scripts import CATCH_UP, KEEP_INDEX, KEPT_GEN, log_kept
from agent_memory.observability import logger, subsegment
from agent_memory.search import snapshot
from agent_memory.search.cache import IndexCache
from agent_memory.search.columns import Known
from agent_memory.search.fusion import Hit
from agent_memory.search.index import ActorIndex
from agent_memory.stores.database import StoreDatabase

HEAD_PROBE = 16 * 1024
"""Bytes of an actor's kept form read with its generation, for its header (``snapshot.
header``: JSON of well under this size); a form read up to its codes is read again from 0."""
LOAD_BATCH = 2000
"""Memories read per HSCAN step when an actor's index is built."""
KEEP_FROM = 64
"""Actors with fewer memories than this have no kept index: their records build one in a few
milliseconds."""


_EXACT_READS: queue.Queue[Callable[[], None]] = queue.Queue()
"""Exact-vector reads waiting (``ActorIndexes._go_exact_later``): one thread of the process
does them one after the other, so that a search over many actors never starts a thread or a
connection per actor."""
_exact_reader: list[threading.Thread] = []
_exact_reader_lock = threading.Lock()


def _read_exact_forever() -> None:
    while True:
        job = _EXACT_READS.get()
        try:
            job()
        finally:
            _EXACT_READS.task_done()


def _read_exact_soon(job: Callable[[], None]) -> None:
    """Queue ``job`` for the process's exact-read thread (started at the first job)."""
    with _exact_reader_lock:
        if not _exact_reader or not _exact_reader[0].is_alive():
            thread = threading.Thread(target=_read_exact_forever, name="index-exact", daemon=True)
            _exact_reader[:] = [thread]
            thread.start()
    _EXACT_READS.put(job)


def wait_for_exact() -> None:
    """Wait until every exact read queued in this process is done (tests and benchmarks)."""
    _EXACT_READS.join()


def keep_lag(memories: int) -> int:
    """Changes a kept index may fall behind its actor before a container that reads the actor
    writes it again: half of what the change log keeps (``scripts.log_kept``), so a new
    container can always catch a kept index up from the log."""
    return log_kept(memories) // 2


class ActorIndexes:
    """The indexes of one store's actors in this container: ``index`` brings one up to date,
    ``warm`` gives the cached one as it is, ``rescore`` makes a compact index's candidates
    exact. Errors: ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase, cache: IndexCache, cache_scope: str) -> None:
        binary = db.binary
        self._redis = db.client
        self._binary = binary
        self._store = db.config
        self._keys = db.keys
        self._check = db.check
        self._cache = cache
        self._scope = cache_scope
        self._catch_up_script = load_script(binary, CATCH_UP)
        self._keep_script = load_script(binary, KEEP_INDEX)

    def warm(self, bucket: str) -> ActorIndex | None:
        """The actor's cached index as it is (no generation read), or None when not cached."""
        index = self._cache.get(self.cache_key(bucket))
        if index is None or index.dimensions != self._store.dimensions:
            return None
        return index

    def cache_key(self, bucket: str) -> tuple[str, ...]:
        """An actor's entry in the container's index cache: instance, store incarnation and
        bucket (a store deleted and created again never meets its old indexes)."""
        return (self._scope, self._store.name, self._store.incarnation, bucket)

    def queue_generation(self, pipe: Pipeline, bucket: str) -> None:
        """Queue the read of the actor's generation and kept generation, for a caller that
        reads them in a round trip of its own (``generation_of`` its reply, then ``index``)."""
        pipe.hmget(self._keys.actor(bucket).meta, ["gen", KEPT_GEN])

    @staticmethod
    def generation_of(reply: Sequence[object]) -> tuple[int, int]:
        """``(gen, kept)`` from the reply of what ``queue_generation`` queued (-1: none kept)."""
        raw_gen, raw_kept = reply
        return int(cast(str, raw_gen) or 0), int(cast(str, raw_kept) or -1)

    def _generation(self, bucket: str) -> tuple[int, int]:
        """``(gen, kept)`` of the actor, read now (one round trip, which also carries the read
        of the store's registry entry while its settings are not confirmed:
        ``stores.freshness``; ``StaleSettings`` when they changed)."""
        with database_errors():
            pipe = self._binary.pipeline(transaction=False)
            self.queue_generation(pipe, bucket)
            checked = self._check.queue(pipe)
            replies = pipe.execute()
        if checked:
            self._check.confirm(replies[-1])
        return self.generation_of(replies[0])

    def index(self, bucket: str, gen: int | None = None, kept: int | None = None) -> ActorIndex:
        """The actor's index, brought up to the actor's current generation (``gen`` when the
        caller has just read it, with ``kept``, the kept generation, when it read that too). An
        index not cached here is read from the actor's kept index (``search.snapshot``) and
        caught up from the change log, or, when there is none or the log no longer reaches it,
        built from the records; the kept index is then written again when it is more than
        ``keep_lag`` changes behind (``keep``). An index read compact from its kept form whose
        float32 vectors fit reads them at the actor's next read (``_go_exact_later``)."""
        key = self.cache_key(bucket)
        actor = self._keys.actor(bucket)
        index = self._cache.get(key)
        if index is not None and index.dimensions != self._store.dimensions:
            index = None
        if index is None:
            with subsegment("index_load"):
                index, kept = self._cold(bucket)
            self._cache.put(key, index)
            index.exact_wanted = index.fits_exact
        elif index.exact_wanted:  # the second read: the one that loaded it is not slowed
            index.exact_wanted = False
            self._go_exact_later(actor, index)
        if gen is None and kept is None:
            gen, kept = self._generation(bucket)
        if gen is not None and index.gen != gen and not self._catch_up(index, actor, gen):
            with subsegment("index_build"):
                index = self._load(actor)
            self._cache.put(key, index)
        if kept is not None:  # below 0: none kept (dropped by a removal), or to be replaced
            index.kept = kept if kept < 0 else max(index.kept, kept)
            self.keep(bucket, index)
        return index

    def _cold(self, bucket: str) -> tuple[ActorIndex, int]:
        """The actor's index for a container that has none: its kept index and the changes
        since, or a build from the records. Returns the index and the kept generation the
        database holds (-1: none).

        The generation, the kept generation and the kept index's first ``HEAD_PROBE`` bytes
        come in one round trip. A kept form with its codes last (``snapshot.head_bytes``) is
        then read up to its codes in a second, and its codes are fetched when needed
        (``KeptCodes``): a few rows' for a search, all of them in the background for an index
        too large for float32 vectors, or before its first change. Any other kept form is read
        whole (its other parts, if any, in a second round trip)."""
        actor = self._keys.actor(bucket)
        with database_errors():
            pipe = self._binary.pipeline(transaction=False)
            self.queue_generation(pipe, bucket)
            pipe.getrange(actor.index_parts[0], 0, HEAD_PROBE - 1)
            # A part that is not a string (WRONGTYPE) is an unreadable kept index, not a failure.
            generation, probe = pipe.execute(raise_on_error=False)
        gen, kept = self.generation_of(generation)
        index = None
        parts: list[object] = [probe] if isinstance(probe, bytes) and probe else []
        if probe is not None and not isinstance(probe, bytes):
            parts = [probe]
        head = snapshot.header([probe]) if isinstance(probe, bytes) and probe else None
        fetched = self._head_only(actor, head)
        if fetched is not None:
            index = fetched
        elif parts and isinstance(probe, bytes):
            parts = self._whole(actor, head)
        unreadable = False
        if parts and index is None:
            if all(isinstance(part, bytes) for part in parts):
                index = snapshot.load(cast(list[bytes], parts), self._store.dimensions)
            unreadable = index is None
        if index is not None and index.gen > gen:
            index, unreadable = None, True  # kept ahead of the actor: cannot be, replace it
        if index is not None and index.gen < gen and not self._catch_up(index, actor, gen):
            index = None  # behind what the log keeps: built, then kept again
        if index is None:
            with subsegment("index_build"):
                index = self._load(actor)
        if parts and unreadable:
            kept = -2  # a kept index that cannot be read here: replaced whatever its generation
        elif index is not None and head is not None and head.get("format") != snapshot.FORMAT:
            kept = -2  # read from an older form: kept again in the current one
        return index, kept

    def _head_only(self, actor: ActorKeys, head: dict[str, Any] | None) -> ActorIndex | None:
        """The index of a kept form whose codes come last (``head`` from its first bytes),
        read up to its codes, its codes left to a ``KeptCodes``; None for any other form, or
        when the form changed or could not be read meanwhile (the caller reads it whole)."""
        length = snapshot.head_bytes(head) if head is not None else None
        if head is None or length is None or length > snapshot.PART_BYTES:
            return None
        with database_errors():
            prefix = self._binary.getrange(actor.index_parts[0], 0, length - 1)
        if not isinstance(prefix, bytes) or snapshot.header([prefix]) != head:
            return None  # kept again meanwhile
        source = KeptCodes(self._binary, actor, head, prefix[: int(head["_data"])])
        index = snapshot.load_head(prefix, self._store.dimensions, source)
        if index is not None:
            source.ids = index.ids
        if index is not None and not index.fits_exact:
            self._codes_later(index, source)
        return index

    def _whole(self, actor: ActorKeys, head: dict[str, Any] | None) -> list[object]:
        """Every part of the kept form ``head`` describes (its first part read again whole),
        in one round trip; what each ``GET`` answered."""
        count = head["parts"] if head is not None and isinstance(head.get("parts"), int) else 1
        with database_errors():
            pipe = self._binary.pipeline(transaction=False)
            for key in actor.index_parts[: max(1, min(count, len(actor.index_parts)))]:
                pipe.get(key)
            found: list[object] = pipe.execute(raise_on_error=False)
        return [part for part in found if part is not None]

    def _codes_later(self, index: ActorIndex, source: KeptCodes) -> None:
        """Fetch every row's codes of an index read without them, in the process's
        exact-read thread, so that its later searches score every pre-filtered row; a failure
        leaves them to be fetched as needed, and is logged."""

        def fetch() -> None:
            try:
                codes = source.all()
                with index.lock:
                    if index.codes_source is source:
                        index.codes = codes.reshape(-1, index.dimensions)
                        index.codes_source = None
                self._cache.resized()
            except Exception as exc:  # noqa: BLE001 - a thread's failure must not end the process
                logger.warning("index codes not read", extra={"error": type(exc).__name__})

        _read_exact_soon(fetch)

    def _go_exact_later(self, actor: ActorKeys, index: ActorIndex) -> None:
        """Read the exact vectors of an index loaded compact from its kept form, in the
        process's exact-read thread (one actor at a time), and switch it to them
        (``ActorIndex.go_exact``), so that the container's later searches scan float32 as a
        built index does, without rescoring candidates. No request waits for it. A failure
        leaves the index compact (still exact after rescoring), and is logged."""
        with index.lock:
            if index.pending is not None:
                return
            index.pending = {}

        def read_and_switch() -> None:
            try:
                vectors: dict[str, bytes] = {}
                for ids, _, blobs in self._scan(actor):
                    vectors.update((i, b) for i, b in zip(ids, blobs, strict=True) if b)
                with index.lock:
                    exact = index.go_exact(vectors)
                if exact:
                    self._cache.resized()  # four times the vectors' bytes now
            except Exception as exc:  # noqa: BLE001 - a thread's failure must not end the process
                with index.lock:
                    index.pending = None
                logger.warning("index stays compact", extra={"error": type(exc).__name__})

        _read_exact_soon(read_and_switch)

    def keep(self, bucket: str, index: ActorIndex) -> None:
        """Write ``index`` as the actor's kept index when the one kept is more than
        ``keep_lag`` changes behind it, or when there is none and the actor has at least
        ``KEEP_FROM`` memories (an actor that has one keeps it up however small it gets). Best
        effort: a database that refuses writes (full, or a read-only replica) keeps the old one;
        a newer one kept meanwhile by another container stays."""
        if len(index) < KEEP_FROM and index.kept == -1:
            return
        if index.kept >= 0 and index.gen - index.kept <= keep_lag(len(index)):
            return
        if index.too_large_at >= 0 and index.gen - index.too_large_at <= keep_lag(len(index)):
            return
        self._check.confirm_now(self._redis)  # never written under settings not confirmed
        actor = self._keys.actor(bucket)
        with subsegment("index_keep"), index.lock:
            parts = snapshot.dump(index, len(actor.index_parts))
            gen, force = index.gen, index.kept == -2
        if not parts:  # larger than a kept index can be: not tried again for a while
            index.too_large_at = gen
            return
        with unless_writes_refused():
            now = self._keep_script(
                keys=[actor.meta, *actor.index_parts], args=[gen, "1" if force else "", *parts]
            )
            index.kept = max(index.kept, int(now), -1)

    def _catch_up(self, index: ActorIndex, actor: ActorKeys, gen: int) -> bool:
        """Bring ``index`` to the actor's state at a generation at least ``gen`` from the
        change log (``CATCH_UP``: one consistent read of the entries and the rows they name);
        False when the log no longer reaches back to the index's generation (reload)."""
        with database_errors():
            now_gen, entries, ids, raws, blobs = self._catch_up_script(
                keys=actor.all(), args=[index.gen]
            )
        now_gen = int(now_gen)
        if now_gen <= index.gen:
            return True
        names = [e.decode() if isinstance(e, bytes) else str(e) for e in entries]
        if not names or int(names[0].split(":", 1)[0]) != index.gen + 1:
            return False
        found = [i.decode() if isinstance(i, bytes) else str(i) for i in ids]
        rows = {}
        for memory_id, raw, kept_apart in zip(found, raws, blobs, strict=True):
            blob = split_memory(raw)[1] or kept_apart if raw is not None else None
            if raw is not None and blob is not None:
                record, json = raw_record_and_json(raw)
                rows[memory_id] = (record, blob, json)
        changed = {name.split(":", 2)[2] for name in names}
        with index.lock:
            if index.gen >= now_gen:
                return True
            for memory_id in changed:
                if memory_id in rows:
                    upsert_row(index, memory_id, *rows[memory_id])
                else:
                    index.remove(memory_id)
            index.gen = now_gen
        return True

    def _load(self, actor: ActorKeys) -> ActorIndex:
        """Build the actor's index from Redis in batches (HSCAN of the stored memories, which
        hold their vectors), so that a large actor never needs all its float32 vectors in
        memory at once. The generation is read first and the change log applied after, which
        accounts for writes made while the batches were read."""
        with database_errors():
            # Not one transaction (MULTI is refused while the database is full): the count only
            # sizes the index, and the log read after the batches accounts for any change.
            pipe = self._redis.pipeline(transaction=False)
            pipe.hget(actor.meta, "gen")
            pipe.hlen(actor.memories)
            raw_gen, count = pipe.execute()
        gen = int(raw_gen or 0)
        index = ActorIndex(dimensions=self._store.dimensions, gen=gen)
        index.reserve(int(count) + int(count) // 20 + 64)  # room for the next writes
        width = self._store.dimensions * 4

        # The batches allocate tens of thousands of small dicts and lists that hold no cycles;
        # pausing the cyclic collector spares it traversing them again and again (about a
        # tenth of a cold build of 10,000 memories).
        with _collector_paused():
            for batch_ids, raws, vectors_found in self._scan(actor):
                ids, records, blobs, stored = [], [], [], []
                for memory_id, raw, blob in zip(batch_ids, raws, vectors_found, strict=True):
                    if blob is not None and len(blob) == width:
                        record, json = raw_record_and_json(raw)
                        ids.append(memory_id)
                        records.append(record)
                        blobs.append(blob)
                        stored.append(json)
                if records:
                    vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(
                        len(records), self._store.dimensions
                    )
                    index.add_many(
                        ids,
                        vectors,
                        [r[F.text] for r in records],
                        [r[F.type] for r in records],
                        [int(r[F.created_at]) for r in records],
                        [int(r[F.expires_at]) for r in records],
                        Known(
                            [stored_terms(r) for r in records],
                            [raw_facts_if_any(r) for r in records],
                            stored,
                        ),
                    )
        with database_errors():
            latest = int(self._redis.hget(actor.meta, "gen") or 0)
        if latest != gen and not self._catch_up(index, actor, latest):
            return self._load(actor)  # too much changed meanwhile: read it again
        return index

    def _scan(
        self, actor: ActorKeys
    ) -> Iterator[tuple[list[str], list[bytes], list[bytes | None]]]:
        """The actor's stored memories in ``HSCAN`` batches of about ``LOAD_BATCH``: their ids,
        stored bytes and vector bytes (``_vectors``)."""
        cursor = 0
        while True:
            with database_errors():
                cursor, scanned = self._binary.hscan(actor.memories, cursor, count=LOAD_BATCH)
                entries = cast(dict[bytes, bytes], scanned)
                ids = [k.decode() for k in entries]
                raws = list(entries.values())
                vectors = self._vectors(actor, ids, raws)
            yield ids, raws, vectors
            if int(cursor) == 0:
                return

    def _vectors(
        self, actor: ActorKeys, ids: Sequence[str], raws: Sequence[bytes | None]
    ) -> list[bytes | None]:
        """The vector bytes of stored memories (``raws``, None where there is none): from each
        memory itself, or, for a record kept before vectors moved into it, from the actor's
        ``vectors`` hash (one HMGET for all such). None where neither has one."""
        found: list[bytes | None] = [
            split_memory(raw)[1] if raw is not None else None for raw in raws
        ]
        apart = [
            i
            for i, (raw, blob) in enumerate(zip(raws, found, strict=True))
            if raw is not None and blob is None
        ]
        if apart:
            with database_errors():
                blobs = self._binary.hmget(actor.vectors, [ids[i] for i in apart])
            for i, blob in zip(apart, blobs, strict=True):
                found[i] = cast(bytes | None, blob)
        return found

    def rescore(self, bucket: str, hits: Sequence[Hit], vector: NDArray[np.float32]) -> list[Hit]:
        """Exact cosines of a compact index's candidates, from the stored float32 vectors;
        best first. The candidates' records come with their vectors: the cached index holds
        those it did not."""
        if not hits:
            return []
        ids = [h.memory_id for h in hits]
        actor = self._keys.actor(bucket)
        with database_errors():
            raws = cast(list[bytes | None], self._binary.hmget(actor.memories, ids))
            blobs = self._vectors(actor, ids, raws)
        index = self.warm(bucket)
        if index is not None:  # the records read: the index holds those it lacks, for the views
            with index.lock:
                index.hold_missing(
                    {i: split_memory(raw)[0] for i, raw in zip(ids, raws, strict=True) if raw}
                )
        kept = [
            (memory_id, blob)
            for memory_id, blob in zip(ids, blobs, strict=True)
            if blob is not None and len(blob) == vector.nbytes
        ]
        if not kept:
            return []
        # One matrix product, as an exact index scores its rows.
        matrix = np.frombuffer(b"".join(blob for _, blob in kept), dtype=np.float32)
        scores = (matrix.reshape(len(kept), vector.shape[0]) @ vector).tolist()
        rescored = [Hit(i, score) for (i, _), score in zip(kept, scores, strict=True)]
        return sorted(rescored, key=lambda h: -h.score)


def upsert_row(
    index: ActorIndex, memory_id: str, record: dict[str, Any], blob: bytes, stored: bytes
) -> None:
    """Enter (or replace) one raw record, its vector bytes and its stored JSON (``stored``,
    held for reads) in ``index``; a vector of another length (written under another dimension
    setting) is not searchable here."""
    vector = np.frombuffer(blob, dtype=np.float32)
    if vector.shape[0] != index.dimensions:
        return
    index.upsert(
        memory_id,
        vector,
        record[F.text],
        record[F.type],
        int(record[F.created_at]),
        int(record[F.expires_at]),
        Known.one(stored_terms(record), raw_facts(record), stored),
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it runs) for the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
