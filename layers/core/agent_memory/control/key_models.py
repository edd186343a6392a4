"""Bodies and answers of the key routes (``POST/GET /keys``, ``DELETE /keys/{key_id}``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from agent_memory.models import (
    INSTANCE_ID_PATTERN,
    SESSION_ID_PATTERN,
    STORE_NAME_PATTERN,
    Model,
    UtcDatetime,
    View,
    said,
)
from agent_memory.scopes import Access, KeyScope

MAX_SCOPE_ITEMS = 100
KEY_ID_PATTERN = said(
    r"^key_[0-9a-f]{12}$", "a key id: 'key_' and 12 lower-case hexadecimal digits"
)


class StoreScope(Model):
    """One store a key reaches."""

    instance_id: Annotated[str, StringConstraints(pattern=INSTANCE_ID_PATTERN)]
    store: Annotated[str, StringConstraints(pattern=STORE_NAME_PATTERN)]


class StoreRefView(View):
    """One store a key reaches, as listed."""

    instance_id: str
    store: str


class KeyCreate(Model):
    """Body of ``POST /keys``: a key limited to ``instances``, ``stores`` and ``actors`` (each
    left out: no limit there), to reading (``access: "read"``), and expiring at ``expires_at``
    (left out: never)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    access: Access
    instances: list[Annotated[str, StringConstraints(pattern=INSTANCE_ID_PATTERN)]] | None = Field(
        None, min_length=1, max_length=MAX_SCOPE_ITEMS
    )
    stores: list[StoreScope] | None = Field(None, min_length=1, max_length=MAX_SCOPE_ITEMS)
    actors: list[Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]] | None = Field(
        None, min_length=1, max_length=MAX_SCOPE_ITEMS
    )
    expires_at: UtcDatetime | None = Field(None, strict=False)

    @field_validator("instances", "actors")
    @classmethod
    def _each_once(cls, given: list[str] | None) -> list[str] | None:
        """A name listed twice is a mistake (the key would then demand what it names, such as
        ``actor_id``, everywhere: issue 32), said naming the first repeated."""
        if given is not None:
            _refuse_repeats(given)
        return given

    @field_validator("stores")
    @classmethod
    def _each_store_once(cls, given: list[StoreScope] | None) -> list[StoreScope] | None:
        if given is not None:
            _refuse_repeats([f"{s.instance_id}/{s.store}" for s in given])
        return given


def _refuse_repeats(names: list[str]) -> None:
    """``ValueError`` naming the first of ``names`` given twice (and where)."""
    seen: dict[str, int] = {}
    for place, name in enumerate(names):
        if name in seen:
            raise ValueError(f"lists '{name}' twice (items {seen[name]} and {place}); list it once")
        seen[name] = place


class KeyView(View):
    """A key as listed: never its secret. ``access`` is ``admin`` for the organization's key."""

    key_id: str
    name: str | None = None
    access: Literal["admin", "read", "write"]
    instances: list[str] | None = None
    stores: list[StoreRefView] | None = None
    actors: list[str] | None = None
    expires_at: datetime | None = None
    created_at: datetime


class KeyCreated(KeyView):
    """Answer of ``POST /keys``: the key, shown this once (only its hash is kept)."""

    api_key: str


MAX_KEY_PAGE = 1_000
"""The most keys one page of ``GET /keys`` lists (its ``limit``, by default this)."""
KEY_CURSOR_PATTERN = said(
    r"^[0-9]{1,16}\.key_[0-9a-f]{12}$", "the next_cursor the page before gave"
)
"""A ``GET /keys`` cursor: ``<created ms>.<key id>`` of the last key of the page before."""


class KeyList(View):
    """Answer of ``GET /keys``: a page of the organization's keys that have not expired,
    oldest first (at most ``limit``, fewer when more would pass the answer's byte budget);
    ``next_cursor`` asks for the next page, null on the last."""

    keys: list[KeyView]
    next_cursor: str | None = Field(
        None, description="Pass as cursor for the next page; null on the last page."
    )


def scope_view(
    key_id: str, created_at: datetime, name: str | None, scope: KeyScope | None
) -> KeyView:
    """A key's listing entry."""
    from agent_memory.clock import from_ms

    if scope is None:
        return KeyView(key_id=key_id, name=name, access="admin", created_at=created_at)
    return KeyView(
        key_id=key_id,
        name=name,
        access=scope.access,
        instances=list(scope.instances) if scope.instances is not None else None,
        stores=[StoreRefView(instance_id=s.instance_id, store=s.store) for s in scope.stores]
        if scope.stores is not None
        else None,
        actors=list(scope.actors) if scope.actors is not None else None,
        expires_at=from_ms(scope.expires_at) if scope.expires_at is not None else None,
        created_at=created_at,
    )
