"""Every Redis key the project writes, in one place.

Layout of a store's data, in the database (instance) the store lives in::

    kividb:mem:@stores                                   hash   store name -> StoreConfig JSON
    kividb:mem:<store>:{<store>}:sessions                zset   session id -> last event (ms)
    kividb:mem:<store>:{<store>}:sessions:expiry         zset   session id -> expiry (ms)
    kividb:mem:<store>:session:{<session>}:meta          hash   actor, sequence, times, summary
    kividb:mem:<store>:session:{<session>}:messages      zset   "<seq>:<json>" scored by seq

Why this is injective without escaping: store names use ``[A-Za-z0-9_.-]`` (no ``:``), so the
store always ends at the first ``:`` after the prefix; session and actor ids use
``[A-Za-z0-9._:@-]`` (no braces), so an id always ends at the first ``}``. Hence
``acme:ops`` + ``s1`` and ``acme`` + ``ops:s1`` can never meet: the second is not a valid store.

Hash tags (the text between the first ``{`` and ``}``) put the keys of one session in one
cluster slot (tag: the session id), and the two indexes of one store in one slot (tag: the store
name), so each Lua script or MULTI touches one slot and the design runs on Redis Cluster (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
Every key of a store also starts with ``kividb:mem:<store>:``, which is how DELETE finds them all.

The control plane (organizations, API keys, instances) lives in the control database under
``kividb:control:``; it is not memory, so it is kept apart from the ``kividb:mem:`` namespace.
"""

from __future__ import annotations

PREFIX = "kividb:mem:"
CONTROL_PREFIX = "kividb:control:"


class StoreKeys:
    """Keys of one store. ``store`` must already be a validated store name."""

    registry = PREFIX + "@stores"

    def __init__(self, store: str) -> None:
        self.store = store
        self._base = f"{PREFIX}{store}:"

    @property
    def all_pattern(self) -> str:
        """SCAN MATCH pattern for every key this store owns (store names hold no glob chars)."""
        return self._base + "*"

    @property
    def sessions(self) -> str:
        return f"{self._base}{{{self.store}}}:sessions"

    @property
    def session_expiry(self) -> str:
        return f"{self._base}{{{self.store}}}:sessions:expiry"

    def session(self, session_id: str) -> SessionKeys:
        return SessionKeys(self._base, session_id)


class SessionKeys:
    """Keys of one session; all share the hash tag ``{<session>}``."""

    def __init__(self, store_base: str, session_id: str) -> None:
        tagged = f"{store_base}session:{{{session_id}}}"
        self.meta = tagged + ":meta"
        self.messages = tagged + ":messages"

    def all(self) -> list[str]:
        return [self.meta, self.messages]


class ControlKeys:
    """Keys of the control plane: organizations, API keys (by hash) and instances."""

    organizations = CONTROL_PREFIX + "orgs"

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
