"""Every Redis key the project writes, in one place.

Layout of a store's data, in the database (instance) the store lives in::

    kividb:mem:@stores                                        hash  store name -> StoreConfig JSON
    kividb:mem:<store>:<inc>:{<store>}:sessions               zset  session id -> last event (ms)
    kividb:mem:<store>:<inc>:{<store>}:sessions:expiry        zset  session id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>}:sessions:deleted       zset  session id -> deleted expiry
    kividb:mem:<store>:<inc>:{<store>}:sessions:unread        zset  session id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>}:extraction             hash  last extraction time, error
    kividb:mem:<store>:<inc>:session:{<session>}:meta         hash  actor, sequence, times, summary
    kividb:mem:<store>:<inc>:session:{<session>}:messages     zset  "<seq>:<json>" scored by seq
    kividb:mem:<store>:<inc>:session:{<session>}:lock         string  background run's token
    kividb:mem:<store>:<inc>:session:{<session>}:once:<sha256> string  a keyed write's outcome
    kividb:mem:<store>:<inc>:{<store>/<p>}:memories           zset  current memory id -> created
    kividb:mem:<store>:<inc>:{<store>/<p>}:memories:expiry    zset  memory id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>/<p>}:memories:superseded zset superseded id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>/<p>}:memories:owner     hash  memory id -> actor bucket
    kividb:mem:<store>:<inc>:{<store>}:memories:actors        set   actor buckets with memories
    kividb:mem:<store>:<inc>:{<store>}:memories:import        string  running import's token
    kividb:mem:<store>:<inc>:{<store>}:profile:actors         set   actor buckets with a profile
    kividb:mem:<store>:<inc>:{<store>/t<tag>}:memories:tag    set   actor buckets of that tag
    kividb:mem:<store>:<inc>:actor:{<actor>}:memories         hash  memory id -> JSON + vector
    kividb:mem:<store>:<inc>:actor:{<actor>}:vectors          hash  memory id -> float32 bytes
    kividb:mem:<store>:<inc>:actor:{<actor>}:log              zset  recent changes by generation
    kividb:mem:<store>:<inc>:actor:{<actor>}:meta             hash  gen, kept_gen, kept_floor
    kividb:mem:<store>:<inc>:actor:{<actor>}:index:<n>        string  part n of the kept index
    kividb:mem:<store>:<inc>:actor:{<actor>}:profile          hash  field -> current value
    kividb:mem:<store>:<inc>:actor:{<actor>}:profile:history  hash  field -> versions (JSON)
    kividb:mem:<store>:<inc>:actor:{<actor>}:consolidations   hash  run id -> run record (JSON)
    kividb:mem:<store>:<inc>:actor:{<actor>}:consolidation    hash  new-memory count, armed, steps
    kividb:mem:<store>:<inc>:actor:{<actor>}:consolidation:lock string  running run's token
    kividb:mem:<store>:<inc>:{<store>}:consolidations         zset  run id -> created (ms)
    kividb:mem:<store>:<inc>:{<store>}:consolidations:actor   hash  run id -> actor bucket
    kividb:mem:<store>:<inc>:idempotency:<sha256 of the key>  string  a write's record, 24 h
    kividb:mem:<store>:<inc>:webhook:<event id>               string  a webhook event's body
    kividb:mem:<store>:<inc>:{<store>}:keyed:namespaces       hash  namespace JSON -> expiry:seen
    kividb:mem:<store>:<inc>:keyed:{<store>/k<ns sha256>}:items  hash  key -> keyed memory
    kividb:mem:<store>:<inc>:keyed:{<store>/k<ns sha256>}:expiry zset  key -> expiry (ms)

Keyed memories (``agent_memory.keyed``) live per namespace, in the slot of a tag made of the
store and the SHA-256 of the namespace's JSON (``k`` and 64 hex digits: neither a partition
number nor an actor tag set's ``t``), so one namespace's upsert is one atomic step and a store's
namespaces spread over a cluster's shards; the store-slot ``keyed:namespaces`` hash says which
namespaces hold some (``keyed.service``).

Memories without an actor live in the bucket ``~``, which no actor id can spell. The
``vectors`` hash holds the vectors of records kept before vectors moved into the records
(``memories.records.encode_memory``); a write of such a memory moves its vector in.

The store-level memory indexes (listing, expiry, superseded, owner) are split in
``memory_partitions`` partitions by memory id (``MemoryIndexKeys``; ``<p>`` is
``crc32(id) mod memory_partitions``), so that on a cluster they spread over the shards instead
of filling the shard of one slot: at a million memories they are about an eighth of the
store's memory. A store created before partitions has one, whose keys are the names above
without ``/<p>``: ``{<store>}:memories`` and so on.

A memory id is ``mem_``, the 4 hex digits of its actor's tag (``actor_tag``: 16 bits of the
bucket's CRC-32) and 16 more. The owner index holds only the ids that do not name their
actor that way (ids made before tags, or imported for another actor). The actor of any other
id is one of the buckets
of its tag's set (``{<store>/t<tag>}:memories:tag``, written when an actor gets its first
memory; usually one bucket), the one whose memories hold the id. That spares the owner entry
of almost every memory, about 83 bytes (docs/design.md, "What a memory costs"). The tag sets
are in slots of their own (``t`` and 4 hex digits never spell a partition number), spread
over a cluster's shards like the actors.

``<inc>`` is the store's incarnation: 12 hex digits drawn when the store is created. A store
deleted and created again under the same name gets a new one, so keys of the old store that a
slow DELETE has not removed yet can never be read or removed as the new store's.

Why this is injective without escaping: store names use ``[A-Za-z0-9_.-]`` (no ``:``), so the
store always ends at the first ``:`` after the prefix, and the incarnation (hex) at the next;
session and actor ids use ``[A-Za-z0-9._:@-]`` (no braces), so an id always ends at the first
``}``. Hence ``acme:ops`` + ``s1`` and ``acme`` + ``ops:s1`` can never meet: the first is not a
valid store.

Hash tags (the text between the first ``{`` and ``}``) put the keys of one session in one
cluster slot (tag: the session id), the keys of one actor's memories in one slot (tag: the
actor bucket), the store-level indexes of one store in one slot (tag: the store name) and
those of one memory partition in one slot (tag: ``<store>/<p>``; ``/`` is in neither the
store nor the session alphabet, so it meets no other tag), so each Lua script or MULTI
touches one slot and the design runs on Redis Cluster
(https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags). A step
that touches two of these (an append, then its index step) is two atomic steps, each on its
slot, ordered so that either order of failure leaves reads consistent (docs/design.md).
Every key of a store incarnation starts with ``kividb:mem:<store>:<inc>:``, which is how DELETE
finds them all.

Keys of one store that are not one session's or one actor's (the ``{<store>}`` ones above:
the session indexes, the actor set, the extraction record) share the store's slot: they are
what the index scripts update together. On a cluster that puts them on one shard; they are
small next to memories (see docs/design.md, "Cluster mode", for what they cost at scale).

Two keys of an instance database belong to no store::

    kividb:mem:@owner                                         string  "<org>/<instance>/<token>"
    kividb:mem:@probe                                         (never written)

``@owner`` marks the database as registered
(``control.instances.InstanceRegistry.register_instance``); ``@probe`` is the key a read-only test
script names (``database.scripts._understands_flags``) so that a cluster can route it (ElastiCache
Serverless refuses scripts without keys). Store names cannot hold ``@``, so no store's keys can meet
them or ``@stores``.

The control plane (organizations, API keys, instances) lives in the control database under
``kividb:control:``; it is not memory, so it is kept apart from the ``kividb:mem:`` namespace.
Every control key has the hash tag ``{control}``: the registration scripts check and write the
address index, the instance record and the organization's set in one atomic step, so on a
cluster they must share a slot (the control plane is small: a few keys per organization,
instance and API key)::

    kividb:control:{control}:orgs                 hash    org id -> {"name", "created_at"} JSON
    kividb:control:{control}:apikey:<sha256 hex>  hash    org_id, key_id, created_at
    kividb:control:{control}:org:<org>:keys       hash    key id -> [sha256 hex, created (ms)]
    kividb:control:{control}:org:<org>:instances  set     instance ids of the organization
    kividb:control:{control}:instance:<instance>  hash    org_id, url, address, token, created_at
    kividb:control:{control}:address:<address>    string  "<org>/<instance>", or "<org>/" while
                                                          a released address is held
    kividb:control:{control}:address-index        string  "1" once every instance is indexed
    kividb:control:{control}:layout               string  "2": the keys above are in this form
    kividb:control:{control}:limits:org:<org>     hash    the organization's limits (set ones)
    kividb:control:{control}:limits:key:<org>:<key>  hash  one key's limits (set ones)
    kividb:control:{control}:bucket:org:<org>     hash    requests token bucket: tokens, ts
    kividb:control:{control}:bucket:key:<org>:<key>  hash  a key's token bucket
    kividb:control:{control}:quota:<day>:org:<org>   hash  messages, memories added that day
    kividb:control:{control}:quota:<day>:key:<org>:<key>  hash  the same, by one key

``<address>`` is the normalized database address (``control.ownership.database_address``),
such as ``redis://localhost:6379/0`` or ``unix:///run/redis.sock?db=0``. Organization and
instance ids hold no ``:`` (``[A-Za-z0-9_-]``), so ``org:<org>:keys`` is injective.

Before the ``{control}`` tag, the same keys were ``kividb:control:orgs``,
``kividb:control:org:{<org>}:keys`` and so on (:func:`legacy_control_key` maps them);
``control.instances.InstanceRegistry`` renames them once, on a single node, when it finds no
``layout`` key.

The local stack's scheduler (standing in for EventBridge Scheduler;
``agent_memory.background.scheduler``) keeps its one-shot schedules in the control database too,
under ``kividb:scheduler:``::

    kividb:scheduler:{<namespace>}:due       zset  schedule name -> due time (ms)
    kividb:scheduler:{<namespace>}:events    hash  schedule name -> event JSON

``<namespace>`` is ``local`` for the stack (tests use names of their own); both keys share it
as their hash tag, so the scripts that arm and take schedules touch one slot.
"""

from __future__ import annotations

import secrets
import zlib
from collections.abc import Iterable
from functools import cached_property

PREFIX = "kividb:mem:"
CONTROL_PREFIX = "kividb:control:"
CONTROL_TAGGED = CONTROL_PREFIX + "{control}:"
PROBE_KEY = PREFIX + "@probe"
"""Named by the flags probe script (``database.scripts._understands_flags``), which reads
nothing."""


def new_incarnation() -> str:
    """A fresh store incarnation: 12 random hex digits (48 bits)."""
    return secrets.token_hex(6)


MEMORY_PARTITIONS = 64
"""Partitions of the store-level memory indexes of a store created now (see above). With 64
on three shards, a shard holds between about 14 and 29 of them (binomial, two standard
deviations), a spread of the store's memory under 1.1 when the indexes are an eighth of it;
a read over the whole store (a count, the store-wide listing, expiry) sends one command per
partition, in one pipeline."""


class MemoryIndexKeys:
    """The store-level memory indexes of one partition; all share one hash tag."""

    def __init__(self, tagged: str) -> None:
        self.memories = tagged + ":memories"
        """zset: memory id -> created (ms) of the current memories (not superseded); the
        store-wide listing, newest first."""
        self.memory_expiry = tagged + ":memories:expiry"
        """zset: memory id -> expiry (ms); exact counts and pruning."""
        self.memories_superseded = tagged + ":memories:superseded"
        """zset: memory id -> expiry (ms) of the memories another one superseded; the count
        of current memories is the live ones of ``memory_expiry`` less these."""
        self.memory_owners = tagged + ":memories:owner"
        """hash: memory id -> actor bucket; finds a memory by id alone."""

    def all(self) -> list[str]:
        """Listing, expiry, owner, superseded: the order ``memories.scripts.UNINDEX`` takes."""
        return [self.memories, self.memory_expiry, self.memory_owners, self.memories_superseded]


class StoreKeys:
    """Keys of one incarnation of a store. ``store`` must already be a validated store name,
    ``incarnation`` a hex string (``new_incarnation()``) and ``memory_partitions`` the store's
    (``stores.models.StoreConfig``; 1 for a store of before partitions, ``MEMORY_PARTITIONS`` for
    one created now): ``StoreConfig.keys()`` gives all three."""

    registry = PREFIX + "@stores"

    def __init__(self, store: str, incarnation: str, memory_partitions: int = 1) -> None:
        if not incarnation or not all(c in "0123456789abcdef" for c in incarnation):
            raise ValueError("a store incarnation is a non-empty lower-case hex string")
        if memory_partitions < 1:
            raise ValueError("a store has at least one memory partition")
        self.store = store
        self._base = f"{PREFIX}{store}:{incarnation}:"
        self._count = memory_partitions

    @cached_property
    def _partitions(self) -> list[MemoryIndexKeys]:
        """Built at first use: a request makes several ``StoreKeys`` (sessions, indexes) that
        never name a partition, and 64 of them are 256 key names."""
        if self._count == 1:
            return [MemoryIndexKeys(f"{self._base}{{{self.store}}}")]
        return [MemoryIndexKeys(f"{self._base}{{{self.store}/{p}}}") for p in range(self._count)]

    def memory_partition(self, memory_id: str) -> MemoryIndexKeys:
        """The store-level index keys of the partition ``memory_id`` belongs to (CRC-32 of
        its UTF-8 bytes, ``zlib.crc32``, modulo the partitions)."""
        return self._partitions[zlib.crc32(memory_id.encode()) % len(self._partitions)]

    def memory_partitions(self) -> list[MemoryIndexKeys]:
        """Every partition's store-level index keys, in partition order."""
        return list(self._partitions)

    def by_partition(self, memory_ids: Iterable[str]) -> list[tuple[MemoryIndexKeys, list[str]]]:
        """``memory_ids`` grouped by partition (each id once, in the order given), partitions
        in order; only those that hold some."""
        groups: dict[int, list[str]] = {}
        seen: set[str] = set()
        for memory_id in memory_ids:
            if memory_id not in seen:
                seen.add(memory_id)
                p = zlib.crc32(memory_id.encode()) % len(self._partitions)
                groups.setdefault(p, []).append(memory_id)
        return [(self._partitions[p], groups[p]) for p in sorted(groups)]

    @property
    def all_pattern(self) -> str:
        """SCAN MATCH pattern for every key of this incarnation (no glob characters in it)."""
        return self._base + "*"

    @property
    def sessions(self) -> str:
        return f"{self._base}{{{self.store}}}:sessions"

    @property
    def session_expiry(self) -> str:
        return f"{self._base}{{{self.store}}}:sessions:expiry"

    @property
    def deleted_sessions(self) -> str:
        return f"{self._base}{{{self.store}}}:sessions:deleted"

    @property
    def unread_sessions(self) -> str:
        """zset: session id -> its expiry (ms), for sessions with messages extraction has not
        read yet (stores with a language model only); ``counts.waiting_for_extraction``."""
        return f"{self._base}{{{self.store}}}:sessions:unread"

    @property
    def extraction(self) -> str:
        """hash: ``last_extraction_at`` (ms) and ``last_extraction_error`` of the store."""
        return f"{self._base}{{{self.store}}}:extraction"

    def session_indexes(self) -> list[str]:
        """The store-slot keys every index script takes, in the order the scripts expect."""
        return [self.sessions, self.session_expiry, self.deleted_sessions, self.unread_sessions]

    def actor_tag_set(self, tag: str) -> str:
        """set: the actor buckets whose ``actor_tag`` is ``tag`` (and that have or had
        memories); where the owner of an id that carries ``tag`` is looked for. Each in the
        slot of its own hash tag, so that a store of many actors spreads these keys over a
        cluster's shards too."""
        return f"{self._base}{{{self.store}/t{tag}}}:memories:tag"

    @property
    def memory_import_lock(self) -> str:
        """string: the token of the batch import running in the store (``SET NX PX``); imports
        of a store run one at a time (``memories.transfer``)."""
        return f"{self._base}{{{self.store}}}:memories:import"

    @property
    def memory_actors(self) -> str:
        """set: the actor buckets that have (or had) memories; store-wide search walks it."""
        return f"{self._base}{{{self.store}}}:memories:actors"

    @property
    def profile_actors(self) -> str:
        """set: the actor buckets that hold (or held) a profile (``memories.profiles``): where
        the actors holding a field are counted, before the field may be removed."""
        return f"{self._base}{{{self.store}}}:profile:actors"

    @property
    def consolidations(self) -> str:
        """zset: consolidation run id -> created (ms), the store's runs newest first."""
        return f"{self._base}{{{self.store}}}:consolidations"

    @property
    def consolidation_actors(self) -> str:
        """hash: consolidation run id -> the actor bucket whose keys hold the run."""
        return f"{self._base}{{{self.store}}}:consolidations:actor"

    def memory_indexes(self) -> list[str]:
        """Every store-level key of long-term memory: each partition's and the actor set."""
        return [key for p in self._partitions for key in p.all()] + [self.memory_actors]

    def session(self, session_id: str) -> SessionKeys:
        return SessionKeys(self._base, session_id)

    def idempotency(self, key_digest: str) -> str:
        """string: the record of the write sent with an ``Idempotency-Key`` whose SHA-256 is
        ``key_digest`` (64 lower-case hex digits; ``stores.idempotency``). A key may hold any
        visible ASCII, braces too, so the name carries its digest: no hash tag, and each record
        in the slot of its own name, spread over a cluster's shards."""
        return f"{self._base}idempotency:{checked_digest(key_digest)}"

    def webhook_body(self, event_id: str) -> str:
        """string: the JSON body of a webhook event of the store (``webhooks.events``), read
        by the delivery side at each attempt; expires with its retry window. Event ids are
        ``evt_`` and base-32 characters (no brace): no hash tag, each in its own slot."""
        return f"{self._base}webhook:{event_id}"

    @property
    def keyed_namespaces(self) -> str:
        """hash: namespace JSON -> ``<expiry ms>:<registered ms>`` of every namespace that
        holds (or held) keyed memories; ``keyed.service`` reads it to list and search."""
        return f"{self._base}{{{self.store}}}:keyed:namespaces"

    def keyed(self, namespace_digest: str) -> KeyedKeys:
        """Keys of the keyed memories of the namespace whose JSON's SHA-256 is
        ``namespace_digest`` (64 lower-case hex digits)."""
        return KeyedKeys(self._base, self.store, checked_digest(namespace_digest))

    def actor(self, bucket: str) -> ActorKeys:
        """Keys of one actor's memories; ``bucket`` is ``actor_bucket(actor_id)``."""
        return ActorKeys(self._base, bucket)


def checked_digest(key_digest: str) -> str:
    """``key_digest`` when it is a SHA-256 as key names hold it (an idempotency key's, a
    keyed namespace's: 64 lower-case hex digits, no ``:``, ``{`` or ``}``, so it ends the name
    or the tag it closes); ``ValueError`` otherwise."""
    if len(key_digest) != 64 or not all(c in "0123456789abcdef" for c in key_digest):
        raise ValueError("a digest in a key name is 64 lower-case hex digits")
    return key_digest


NO_ACTOR = "~"


def actor_tag(bucket: str) -> str:
    """The tag of an actor bucket: the low 16 bits of the CRC-32 of its UTF-8 bytes
    (``zlib.crc32``), as 4 lower-case hex digits; the digits after ``mem_`` of the ids of the
    memories made for it (see above)."""
    return format(zlib.crc32(bucket.encode()) & 0xFFFF, "04x")


def id_tag(memory_id: str) -> str:
    """The actor tag a memory id carries (``mem_`` and 20 hex digits: the first 4 of them)."""
    return memory_id[4:8]


def actor_bucket(actor_id: str | None) -> str:
    """The bucket of an actor's memories: the actor id, or ``~`` (outside the id alphabet, so
    it cannot collide with an actor) for memories that belong to no actor."""
    return actor_id if actor_id else NO_ACTOR


class ActorKeys:
    """Keys of one actor's memories; all share the hash tag ``{<bucket>}``.

    ``memories`` hash id -> memory JSON; ``vectors`` hash id -> float32 bytes (unit length);
    ``log`` zset "<gen>:<op>:<id>" scored by generation,
    the recent changes that let a warm cache catch up without reloading; ``meta`` hash with
    ``gen``, the generation every change increments, ``kept_gen``, the generation of the kept
    index, and ``kept_floor``, the generation from which one may be written; ``index_parts``
    strings, the parts of the actor's kept index (``search.snapshot``: the index in a form a
    new container loads without parsing), part 0 first. ``:index:<n>`` ends in a number, which
    no other actor key does. ``profile`` and ``profile_history`` hold the actor's profile
    (``memories.profiles``): in the actor's slot, so that forgetting the actor, and a change of
    several fields with their versions, is one atomic step.
    """

    INDEX_PARTS = 3
    """Parts of a kept index at most (``search.snapshot.MAX_PARTS``)."""

    def __init__(self, store_base: str, bucket: str) -> None:
        tagged = f"{store_base}actor:{{{bucket}}}"
        self.bucket = bucket
        self.memories = tagged + ":memories"
        self.vectors = tagged + ":vectors"
        self.log = tagged + ":log"
        self.meta = tagged + ":meta"
        self.index_parts = [f"{tagged}:index:{n}" for n in range(self.INDEX_PARTS)]
        self.profile = tagged + ":profile"
        """hash: profile field name -> the field's current value, time and source (JSON)."""
        self.profile_history = tagged + ":profile:history"
        """hash: profile field name -> the field's versions, newest first (JSON list)."""
        self.consolidations = tagged + ":consolidations"
        """hash: consolidation run id -> the run's record (``consolidation.models``)."""
        self.consolidation = tagged + ":consolidation"
        """hash: the actor's consolidation state: new memories since the last run, the armed
        run's due time, and the steps applied by a run in progress (``consolidation.runs``)."""
        self.consolidation_lock = tagged + ":consolidation:lock"
        """string: the token of the actor's consolidation run in progress."""

    def all(self) -> list[str]:
        """In the order the actor scripts expect: memories, vectors, log, meta, then the kept
        index's parts (which a removal deletes in the same step)."""
        return [self.memories, self.vectors, self.log, self.meta, *self.index_parts]


class KeyedKeys:
    """Keys of one namespace's keyed memories; both share the hash tag
    ``{<store>/k<digest>}``. ``items`` hash key -> the stored keyed memory
    (``keyed.records``); ``expiry`` zset key -> expiry (ms)."""

    def __init__(self, store_base: str, store: str, digest: str) -> None:
        tagged = f"{store_base}keyed:{{{store}/k{digest}}}"
        self.items = tagged + ":items"
        self.expiry = tagged + ":expiry"

    def all(self) -> list[str]:
        """In the order the keyed scripts expect."""
        return [self.items, self.expiry]


class SessionKeys:
    """Keys of one session; all share the hash tag ``{<session>}``."""

    def __init__(self, store_base: str, session_id: str) -> None:
        tagged = f"{store_base}session:{{{session_id}}}"
        self.meta = tagged + ":meta"
        self.messages = tagged + ":messages"
        self.lock = tagged + ":lock"
        """string: the token of the background run working on the session (expires)."""
        self._tagged = tagged

    def once(self, key_digest: str) -> str:
        """string: the outcome of the append or pop sent with an ``Idempotency-Key`` whose
        SHA-256 is ``key_digest`` (64 lower-case hex digits), written by that write's own
        script in the session's slot (``sessions.scripts``), so a write done is known done even
        when its answer was lost; 24 hours."""
        return f"{self._tagged}:once:{checked_digest(key_digest)}"

    def all(self) -> list[str]:
        return [self.meta, self.messages]


class InstanceKeys:
    """Keys of an instance database that belong to no store (also ``PROBE_KEY``)."""

    owner = PREFIX + "@owner"
    """string: ``<org>/<instance>/<token>`` of the registration that holds the database (a
    pending or released one expires on its own)."""


class ControlKeys:
    """Keys of the control plane: organizations, API keys (by hash) and instances; all in the
    slot of the hash tag ``{control}``."""

    organizations = CONTROL_TAGGED + "orgs"
    address_index_complete = CONTROL_TAGGED + "address-index"
    """string: set once every instance record has an address in the index (records written
    before the index existed are indexed by the first registration that finds them)."""
    layout = CONTROL_TAGGED + "layout"
    """string: ``"2"`` once the control keys carry the ``{control}`` tag (legacy keys, if
    there were any, renamed)."""
    instance_pattern = CONTROL_TAGGED + "instance:*"
    """SCAN MATCH pattern of every instance record (instance ids hold no glob characters;
    braces are not glob characters)."""
    legacy_pattern = CONTROL_PREFIX + "*"
    """SCAN MATCH pattern that finds the control keys of before the ``{control}`` tag (and the
    current ones, which :func:`legacy_control_key` leaves out)."""

    @staticmethod
    def api_key(key_hash: str) -> str:
        return f"{CONTROL_TAGGED}apikey:{key_hash}"

    @staticmethod
    def org_keys(org_id: str) -> str:
        return f"{CONTROL_TAGGED}org:{org_id}:keys"

    @staticmethod
    def org_key_expiry(org_id: str) -> str:
        """zset: the organization's keys that expire (member: key id, score: when, ms), so that
        the expired ones are found and purged without reading every key (``ApiKeys.purge``).
        ``org:<org>:key-expiry`` cannot be ``org_keys`` or ``org_instances`` of any org: an
        organization id holds no ``:`` (``control.models.ORG_ID``)."""
        return f"{CONTROL_TAGGED}org:{org_id}:key-expiry"

    @staticmethod
    def org_instances(org_id: str) -> str:
        return f"{CONTROL_TAGGED}org:{org_id}:instances"

    @staticmethod
    def instance(instance_id: str) -> str:
        return f"{CONTROL_TAGGED}instance:{instance_id}"

    @staticmethod
    def limits(org_id: str, key_id: str | None = None) -> str:
        """hash: the limits set for ``org_id`` (or for one of its keys): ``control.limits``."""
        who = f"org:{org_id}" if key_id is None else f"key:{org_id}:{key_id}"
        return f"{CONTROL_TAGGED}limits:{who}"

    @staticmethod
    def bucket(org_id: str, key_id: str | None = None) -> str:
        """hash: the token bucket of requests of ``org_id`` (or of one of its keys):
        ``tokens`` and ``ts`` (ms); expires once full again."""
        who = f"org:{org_id}" if key_id is None else f"key:{org_id}:{key_id}"
        return f"{CONTROL_TAGGED}bucket:{who}"

    @staticmethod
    def quota(org_id: str, day: str, key_id: str | None = None) -> str:
        """hash: what ``org_id`` (or one of its keys) added on ``day`` (``YYYYMMDD``, UTC):
        ``messages``, ``memories``; expires two days later."""
        who = f"org:{org_id}" if key_id is None else f"key:{org_id}:{key_id}"
        return f"{CONTROL_TAGGED}quota:{day}:{who}"

    @staticmethod
    def usage(org_id: str, day: str) -> str:
        """hash: what ``org_id`` used on ``day`` (``YYYYMMDD``, UTC), one field per store and
        counter (``usage_field``); expires ``control.usage.KEEP_DAYS`` days later."""
        return f"{CONTROL_TAGGED}usage:{day}:org:{org_id}"

    @staticmethod
    def usage_field(instance_id: str, store: str, counter: str) -> str:
        """A field of ``usage``: ``<instance>/<store>|<counter>``, or ``-|<counter>`` for a
        request that names no store (``instance_id`` or ``store`` empty). Instance ids and
        store names hold only ``[A-Za-z0-9_.-]`` (``models.INSTANCE_ID_PATTERN``,
        ``STORE_NAME_PATTERN``), so the first ``|`` ends the store and a counter (a route key
        holds spaces, ``/`` and braces) can hold anything."""
        where = f"{instance_id}/{store}" if instance_id and store else "-"
        return f"{where}|{counter}"

    webhooks_due = CONTROL_TAGGED + "webhooks:due"
    """zset (before per-organization queues): delivery id -> when it is next tried (ms). No
    longer written; what it still holds is moved to ``webhooks_due_of`` by the sender."""
    webhooks_due_orgs = CONTROL_TAGGED + "webhooks:due-orgs"
    """zset: organization id -> the earliest next attempt (ms) in its ``webhooks_due_of``;
    an organization with nothing queued is not in it. Distinct from ``webhooks_due`` and from
    every ``webhooks_due_of`` (those go on with ``:``, this one with ``-``)."""

    @staticmethod
    def webhooks_due_of(org_id: str) -> str:
        """zset: the organization's deliveries still to be tried, id -> when it is next tried
        (ms); a delivery being tried is leased (scored a minute ahead), so that one whose
        sender died is tried again. ``webhooks_due_of("")`` is the prefix the outbox's Lua
        adds organization ids to."""
        return f"{CONTROL_TAGGED}webhooks:due:org:{org_id}"

    @staticmethod
    def webhook(delivery_id: str) -> str:
        """string: one delivery as JSON (``webhooks.models.Delivery``); ``webhook("")`` is the
        prefix the outbox's Lua adds ids to."""
        return f"{CONTROL_TAGGED}webhook:{delivery_id}"

    @staticmethod
    def webhook_log(org_id: str, instance_id: str, store: str) -> str:
        """list: the ids of a store's last deliveries, newest first (``outbox.LOG_SIZE``)."""
        return f"{CONTROL_TAGGED}webhooks:log:{org_id}:{instance_id}/{store}"

    @staticmethod
    def address(address: str) -> str:
        """string: who holds the normalized database ``address``: ``<org>/<instance>``, or
        ``<org>/`` (with an expiry) for an address that organization released moments ago."""
        return f"{CONTROL_TAGGED}address:{address}"


def legacy_control_key(key: str) -> str | None:
    """The current name of a control key named as before the ``{control}`` tag
    (``kividb:control:orgs`` -> ``kividb:control:{control}:orgs``,
    ``kividb:control:org:{<org>}:keys`` -> ``kividb:control:{control}:org:<org>:keys``), or
    None for a key that is not one (a current key, or anything else)."""
    if not key.startswith(CONTROL_PREFIX) or key.startswith(CONTROL_TAGGED):
        return None
    rest = key.removeprefix(CONTROL_PREFIX)
    if rest in ("orgs", "address-index"):
        return CONTROL_TAGGED + rest
    for kind in ("apikey:", "instance:", "address:"):
        if rest.startswith(kind) and len(rest) > len(kind):
            return CONTROL_TAGGED + rest
    if rest.startswith("org:{"):
        org, close, tail = rest.removeprefix("org:{").partition("}")
        if close and org and tail in (":keys", ":instances"):
            return f"{CONTROL_TAGGED}org:{org}{tail}"
    return None


SCHEDULER_PREFIX = "kividb:scheduler:"


class LocalScheduleKeys:
    """Keys of the local scheduler's one-shot schedules (``agent_memory.background.scheduler``).

    ``due`` zset: schedule name -> due time (ms); ``events`` hash: schedule name -> the event
    JSON the background function receives. ``namespace`` must not hold ``{`` or ``}``.
    """

    def __init__(self, namespace: str = "local") -> None:
        if not namespace or "{" in namespace or "}" in namespace:
            raise ValueError("a schedule namespace is a non-empty string without braces")
        tagged = f"{SCHEDULER_PREFIX}{{{namespace}}}"
        self.due = tagged + ":due"
        self.events = tagged + ":events"
