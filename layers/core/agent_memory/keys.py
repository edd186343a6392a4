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
    kividb:mem:<store>:<inc>:{<store>}:memories               zset  current memory id -> created
    kividb:mem:<store>:<inc>:{<store>}:memories:expiry        zset  memory id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>}:memories:superseded    zset  superseded id -> expiry (ms)
    kividb:mem:<store>:<inc>:{<store>}:memories:owner         hash  memory id -> actor bucket
    kividb:mem:<store>:<inc>:{<store>}:memories:actors        set   actor buckets with memories
    kividb:mem:<store>:<inc>:actor:{<actor>}:memories         hash  memory id -> memory JSON
    kividb:mem:<store>:<inc>:actor:{<actor>}:vectors          hash  memory id -> float32 bytes
    kividb:mem:<store>:<inc>:actor:{<actor>}:log              zset  recent changes by generation
    kividb:mem:<store>:<inc>:actor:{<actor>}:meta             hash  gen (change counter)

Memories without an actor live in the bucket ``~``, which no actor id can spell.

``<inc>`` is the store's incarnation: 12 hex digits drawn when the store is created. A store
deleted and created again under the same name gets a new one, so keys of the old store that a
slow DELETE has not removed yet can never be read or removed as the new store's.

Why this is injective without escaping: store names use ``[A-Za-z0-9_.-]`` (no ``:``), so the
store always ends at the first ``:`` after the prefix, and the incarnation (hex) at the next;
session and actor ids use ``[A-Za-z0-9._:@-]`` (no braces), so an id always ends at the first
``}``. Hence ``acme:ops`` + ``s1`` and ``acme`` + ``ops:s1`` can never meet: the first is not a
valid store.

Hash tags (the text between the first ``{`` and ``}``) put the keys of one session in one
cluster slot (tag: the session id), and the three indexes of one store in one slot (tag: the
store name), so each Lua script or MULTI touches one slot and the design runs on Redis Cluster
(https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
Every key of a store incarnation starts with ``kividb:mem:<store>:<inc>:``, which is how DELETE
finds them all.

One key of an instance database belongs to no store::

    kividb:mem:@owner                                         string  "<org>/<instance>/<token>"

It marks the database as registered (``control.ControlPlane.register_instance``); store names
cannot hold ``@``, so no store's keys can meet it or ``@stores``.

The control plane (organizations, API keys, instances) lives in the control database under
``kividb:control:``; it is not memory, so it is kept apart from the ``kividb:mem:`` namespace::

    kividb:control:orgs                           hash    org id -> {"name", "created_at"} JSON
    kividb:control:apikey:<sha256 hex>            hash    org_id, key_id, created_at
    kividb:control:org:{<org>}:keys               hash    key id -> [sha256 hex, created (ms)]
    kividb:control:org:{<org>}:instances          set     instance ids of the organization
    kividb:control:instance:<instance>            hash    org_id, url, address, token, created_at
    kividb:control:address:<address>              string  "<org>/<instance>", or "<org>/" while
                                                          a released address is held
    kividb:control:address-index                  string  "1" once every instance is indexed

``<address>`` is the normalized database address (``instances.database_address``), such as
``redis://localhost:6379/0`` or ``unix:///run/redis.sock?db=0``.

The local stack's scheduler (standing in for EventBridge Scheduler; ``agent_memory.scheduler``)
keeps its one-shot schedules in the control database too, under ``kividb:scheduler:``::

    kividb:scheduler:{<namespace>}:due       zset  schedule name -> due time (ms)
    kividb:scheduler:{<namespace>}:events    hash  schedule name -> event JSON

``<namespace>`` is ``local`` for the stack (tests use names of their own); both keys share it
as their hash tag, so the scripts that arm and take schedules touch one slot.
"""

from __future__ import annotations

import secrets

PREFIX = "kividb:mem:"
CONTROL_PREFIX = "kividb:control:"


def new_incarnation() -> str:
    """A fresh store incarnation: 12 random hex digits (48 bits)."""
    return secrets.token_hex(6)


class StoreKeys:
    """Keys of one incarnation of a store. ``store`` must already be a validated store name and
    ``incarnation`` a hex string (``new_incarnation()``)."""

    registry = PREFIX + "@stores"

    def __init__(self, store: str, incarnation: str) -> None:
        if not incarnation or not all(c in "0123456789abcdef" for c in incarnation):
            raise ValueError("a store incarnation is a non-empty lower-case hex string")
        self.store = store
        self._base = f"{PREFIX}{store}:{incarnation}:"

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

    @property
    def memories(self) -> str:
        """zset: memory id -> created (ms) of the current memories (not superseded); the
        store-wide listing, newest first."""
        return f"{self._base}{{{self.store}}}:memories"

    @property
    def memories_superseded(self) -> str:
        """zset: memory id -> expiry (ms) of the memories another one superseded; the store's
        count of current memories is the live ones of ``memory_expiry`` less these."""
        return f"{self._base}{{{self.store}}}:memories:superseded"

    @property
    def memory_expiry(self) -> str:
        """zset: memory id -> expiry (ms); exact counts and pruning."""
        return f"{self._base}{{{self.store}}}:memories:expiry"

    @property
    def memory_owners(self) -> str:
        """hash: memory id -> actor bucket; finds a memory by id alone."""
        return f"{self._base}{{{self.store}}}:memories:owner"

    @property
    def memory_actors(self) -> str:
        """set: the actor buckets that have (or had) memories; store-wide search walks it."""
        return f"{self._base}{{{self.store}}}:memories:actors"

    def memory_indexes(self) -> list[str]:
        """Every store-slot key of long-term memory."""
        return [
            self.memories,
            self.memory_expiry,
            self.memory_owners,
            self.memory_actors,
            self.memories_superseded,
        ]

    def session(self, session_id: str) -> SessionKeys:
        return SessionKeys(self._base, session_id)

    def actor(self, bucket: str) -> ActorKeys:
        """Keys of one actor's memories; ``bucket`` is ``actor_bucket(actor_id)``."""
        return ActorKeys(self._base, bucket)


NO_ACTOR = "~"


def actor_bucket(actor_id: str | None) -> str:
    """The bucket of an actor's memories: the actor id, or ``~`` (outside the id alphabet, so
    it cannot collide with an actor) for memories that belong to no actor."""
    return actor_id if actor_id else NO_ACTOR


class ActorKeys:
    """Keys of one actor's memories; all share the hash tag ``{<bucket>}``.

    ``memories`` hash id -> memory JSON; ``vectors`` hash id -> float32 bytes (unit length);
    ``log`` zset "<gen>:<op>:<id>" scored by generation,
    the recent changes that let a warm cache catch up without reloading; ``meta`` hash with
    ``gen``, the generation every change increments.
    """

    def __init__(self, store_base: str, bucket: str) -> None:
        tagged = f"{store_base}actor:{{{bucket}}}"
        self.bucket = bucket
        self.memories = tagged + ":memories"
        self.vectors = tagged + ":vectors"
        self.log = tagged + ":log"
        self.meta = tagged + ":meta"

    def all(self) -> list[str]:
        """In the order the actor scripts expect."""
        return [self.memories, self.vectors, self.log, self.meta]


class SessionKeys:
    """Keys of one session; all share the hash tag ``{<session>}``."""

    def __init__(self, store_base: str, session_id: str) -> None:
        tagged = f"{store_base}session:{{{session_id}}}"
        self.meta = tagged + ":meta"
        self.messages = tagged + ":messages"
        self.lock = tagged + ":lock"
        """string: the token of the background run working on the session (expires)."""

    def all(self) -> list[str]:
        return [self.meta, self.messages]


class InstanceKeys:
    """Keys of an instance database that belong to no store."""

    owner = PREFIX + "@owner"
    """string: ``<org>/<instance>/<token>`` of the registration that holds the database (a
    pending or released one expires on its own)."""


class ControlKeys:
    """Keys of the control plane: organizations, API keys (by hash) and instances."""

    organizations = CONTROL_PREFIX + "orgs"
    address_index_complete = CONTROL_PREFIX + "address-index"
    """string: set once every instance record has an address in the index (records written
    before the index existed are indexed by the first registration that finds them)."""
    instance_pattern = CONTROL_PREFIX + "instance:*"
    """SCAN MATCH pattern of every instance record (instance ids hold no glob characters)."""

    @staticmethod
    def api_key(key_hash: str) -> str:
        return f"{CONTROL_PREFIX}apikey:{key_hash}"

    @staticmethod
    def org_keys(org_id: str) -> str:
        return f"{CONTROL_PREFIX}org:{{{org_id}}}:keys"

    @staticmethod
    def org_instances(org_id: str) -> str:
        return f"{CONTROL_PREFIX}org:{{{org_id}}}:instances"

    @staticmethod
    def instance(instance_id: str) -> str:
        return f"{CONTROL_PREFIX}instance:{instance_id}"

    @staticmethod
    def address(address: str) -> str:
        """string: who holds the normalized database ``address``: ``<org>/<instance>``, or
        ``<org>/`` (with an expiry) for an address that organization released moments ago."""
        return f"{CONTROL_PREFIX}address:{address}"


SCHEDULER_PREFIX = "kividb:scheduler:"


class LocalScheduleKeys:
    """Keys of the local scheduler's one-shot schedules (``agent_memory.scheduler``).

    ``due`` zset: schedule name -> due time (ms); ``events`` hash: schedule name -> the event
    JSON the background function receives. ``namespace`` must not hold ``{`` or ``}``.
    """

    def __init__(self, namespace: str = "local") -> None:
        if not namespace or "{" in namespace or "}" in namespace:
            raise ValueError("a schedule namespace is a non-empty string without braces")
        tagged = f"{SCHEDULER_PREFIX}{{{namespace}}}"
        self.due = tagged + ":due"
        self.events = tagged + ":events"
