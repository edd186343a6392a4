"""What an API key may reach: ``KeyScope``, read by the authorizer and checked by the core.

An organization's key without a scope is its admin key: every instance, store and actor, reads
and writes, and the management of stores and keys. A scoped key (``POST /keys``) may be limited
to some instances, some stores, some actors, to reading, and may expire. Outside its scope a key
sees what a stranger sees (the same 404 as for a thing that does not exist); a write with a
read-only key is 403 ``forbidden``; an expired key is 401.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

Access = Literal["read", "write"]


class StoreRef(BaseModel):
    """One store of one instance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_id: str
    store: str


class KeyScope(BaseModel):
    """A scoped key's limits; ``None`` for a dimension means no limit on it. ``expires_at``: ms
    since the epoch (UTC), or None for a key that does not expire."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    access: Access = "write"
    instances: tuple[str, ...] | None = None
    stores: tuple[StoreRef, ...] | None = None
    actors: tuple[str, ...] | None = None
    expires_at: int | None = None

    @property
    def writes(self) -> bool:
        """Whether the key may write."""
        return self.access == "write"

    def allows_instance(self, instance_id: str) -> bool:
        """Whether the key reaches anything on ``instance_id``."""
        if self.instances is not None and instance_id not in self.instances:
            return False
        return self.stores is None or any(s.instance_id == instance_id for s in self.stores)

    def allows_store(self, instance_id: str, store: str) -> bool:
        """Whether the key reaches ``store`` of ``instance_id``."""
        if not self.allows_instance(instance_id):
            return False
        return self.stores is None or StoreRef(instance_id=instance_id, store=store) in self.stores

    def allows_actor(self, actor_id: str | None) -> bool:
        """Whether the key reaches the memories and sessions of ``actor_id`` (None: of no
        actor, which only a key without an actor limit reaches)."""
        return self.actors is None or (actor_id is not None and actor_id in self.actors)

    @property
    def whole_stores(self) -> bool:
        """Whether the key reaches every actor of the stores it reaches (no actor limit)."""
        return self.actors is None

    @property
    def manages_stores(self) -> bool:
        """Whether the key may create, change and delete stores: a write key limited at most
        to some instances."""
        return self.writes and self.stores is None and self.actors is None

    def to_text(self) -> str:
        """Compact JSON, as the control database and the authorizer's context carry it."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> KeyScope:
        """Inverse of ``to_text``; pydantic's ``ValidationError`` for anything else."""
        return cls.model_validate_json(text)


def actor_for(scope: KeyScope | None, actor_id: str | None, field: str = "actor_id") -> str | None:
    """The actor a request names, as the key may name it: ``actor_id`` itself for a key without
    actor limits; for an actor-limited key, ``actor_id`` when the key reaches it (``Forbidden``
    otherwise), or, left out, the key's one actor (``ValidationFailed`` when it has several)."""
    from agent_memory.errors import Forbidden, ValidationFailed

    if scope is None or scope.actors is None:
        return actor_id
    if actor_id is None:
        if len(scope.actors) == 1:
            return scope.actors[0]
        raise ValidationFailed(
            f"This API key reaches {len(scope.actors)} actors: give {field}.",
            details=[{"field": field, "problem": "required with a key limited to several actors"}],
        )
    if actor_id not in scope.actors:
        raise Forbidden(f"This API key does not reach actor '{actor_id}'.")
    return actor_id


READ_ONLY = "This API key is read-only: it cannot write."


def require_write(scope: KeyScope | None, what: str = "") -> None:
    """``Forbidden`` for a read-only key: on a route that writes, or asking a read to change
    something (``what``, named in the message)."""
    if scope is not None and not scope.writes:
        from agent_memory.errors import Forbidden

        raise Forbidden(READ_ONLY.removesuffix(".") + f" ({what})." if what else READ_ONLY)


def require_whole_store(scope: KeyScope | None, what: str) -> None:
    """``Forbidden`` for an actor-limited key on a route that reads or writes a whole store
    (``what``: "list sessions", "export", ...), which would reach other actors."""
    if scope is not None and scope.actors is not None:
        from agent_memory.errors import Forbidden

        raise Forbidden(
            f"This API key is limited to some actors: it cannot {what}, which reaches every "
            "actor of the store."
        )


def require_admin(scope: KeyScope | None, what: str) -> None:
    """``Forbidden`` for any scoped key on what only the organization's admin key may do
    (``what``, as the 403 says it: "manages API keys")."""
    if scope is not None:
        from agent_memory.errors import Forbidden

        raise Forbidden(f"Only the organization's admin key {what}; this key is a scoped one.")
