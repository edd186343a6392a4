"""Bodies and answers of the key routes (``POST/GET /keys``, ``DELETE /keys/{key_id}``), as the
client sends and reads them; the conventions of ``kividb_memory.models`` hold (it re-exports
these)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from kividb_memory.model_bases import Answer, Request


class StoreScope(Request):
    """One store a scoped key reaches."""

    instance_id: str
    store: str


class StoreRefView(Answer):
    """One store a key reaches, as listed."""

    instance_id: str
    store: str


class KeyCreate(Request):
    """Body of ``create_key``: a key limited to ``instances``, ``stores`` and ``actors`` (each
    left out: no limit there), to reading, and expiring at ``expires_at``."""

    name: str | None = None
    access: Literal["read", "write"]
    instances: list[str] | None = None
    stores: list[StoreScope] | None = None
    actors: list[str] | None = None
    expires_at: datetime | str | None = None


class KeyView(Answer):
    """A key as listed (never its secret); ``access`` ``admin`` for the organization's key."""

    key_id: str
    name: str | None = None
    access: Literal["admin", "read", "write"]
    instances: list[str] | None = None
    stores: list[StoreRefView] | None = None
    actors: list[str] | None = None
    expires_at: datetime | None = None
    created_at: datetime


class KeyCreated(KeyView):
    """Answer of ``create_key``: with ``api_key``, shown this once."""

    api_key: str


class KeyList(Answer):
    """Answer of ``list_keys``: a page of the keys that have not expired, oldest first;
    ``next_cursor`` (the ``cursor`` of the next page) is None on the last."""

    keys: list[KeyView]
    next_cursor: str | None = None
