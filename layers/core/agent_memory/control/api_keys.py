"""API keys of organizations: issue, register, revoke, list, and authenticate a request.

API keys are 256-bit random tokens (``kvm_`` + 43 URL-safe characters). Only their SHA-256 is
stored: a fast hash is the right tool for high-entropy tokens (unlike passwords, they cannot be
guessed from a dictionary), and it lets a request be authenticated with one lookup. This module
is all the authorizer function loads of the control plane.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.errors import NotFound, Unauthorized, ValidationFailed
from agent_memory.models import Principal

if TYPE_CHECKING:
    from agent_memory.control.database import ControlDatabase
    from agent_memory.control.organizations import Organizations

KEY_PREFIX = "kvm_"
MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 512


@dataclass(frozen=True)
class ApiKeyInfo:
    """An API key as listed: its id and when it was made (the key itself is not stored)."""

    key_id: str
    created_at: datetime


def hash_api_key(api_key: str) -> str:
    """Hex SHA-256 of the key's UTF-8 bytes; what the control plane stores instead of the key."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


class ApiKeys:
    """The API keys of the control database. Errors: ``Unauthorized``, ``NotFound``,
    ``ValidationFailed``, ``DatabaseUnavailable``."""

    def __init__(
        self,
        database: ControlDatabase,
        clock: Clock,
        organizations: Organizations | None = None,
    ) -> None:
        """``organizations``: the control plane's, which managing keys checks; made at first
        use when not given (the authorizer only authenticates, and never needs it)."""
        self._database = database
        self._clock = clock
        self._given_organizations = organizations

    @property
    def _organizations(self) -> Organizations:
        if self._given_organizations is None:
            from agent_memory.control.organizations import Organizations

            self._given_organizations = Organizations(self._database, self._clock)
        return self._given_organizations

    def issue(self, org_id: str) -> tuple[str, str]:
        """Make a new key for ``org_id``; returns ``(key_id, api_key)``. The key is shown once."""
        api_key = KEY_PREFIX + secrets.token_urlsafe(32)
        return self.register(org_id, api_key), api_key

    def register(self, org_id: str, api_key: str) -> str:
        """Accept a caller-chosen key (the local stack's ``KIVIDB_API_KEY``); returns its key id.

        Registering a key that already exists for the same organization returns its id again.
        """
        if not MIN_KEY_CHARS <= len(api_key) <= MAX_KEY_CHARS or not api_key.isprintable():
            raise ValidationFailed(
                f"An API key must be {MIN_KEY_CHARS}-{MAX_KEY_CHARS} printable characters."
            )
        self._organizations.require(org_id)
        digest = hash_api_key(api_key)
        client = self._database.redis
        with database_errors():
            existing = client.hgetall(ControlKeys.api_key(digest))
            if existing:
                if existing["org_id"] != org_id:
                    raise ValidationFailed("That API key is already used by another organization.")
                return str(existing["key_id"])
            key_id = "key_" + secrets.token_hex(6)
            now = to_ms(self._clock.now())
            pipe = client.pipeline(transaction=False)
            pipe.hset(
                ControlKeys.api_key(digest),
                mapping={"org_id": org_id, "key_id": key_id, "created_at": now},
            )
            pipe.hset(ControlKeys.org_keys(org_id), key_id, json.dumps([digest, now]))
            pipe.execute()
        return key_id

    def revoke(self, org_id: str, key_id: str) -> None:
        """Revoke at once: the next request with that key is a 401. ``NotFound`` if the
        organization does not exist (said so) or has no such key."""
        client = self._database.redis
        with database_errors():
            raw = client.hget(ControlKeys.org_keys(org_id), key_id)
            if raw is None:
                self._organizations.require(org_id)
                raise NotFound(f"Organization '{org_id}' has no API key '{key_id}'.")
            digest = json.loads(raw)[0]
            pipe = client.pipeline(transaction=False)
            pipe.delete(ControlKeys.api_key(digest))
            pipe.hdel(ControlKeys.org_keys(org_id), key_id)
            pipe.execute()

    def of(self, org_id: str) -> list[ApiKeyInfo]:
        """The key ids of ``org_id`` with their creation times, oldest first (the keys
        themselves are not stored); ``NotFound`` without the organization."""
        self._organizations.require(org_id)
        with database_errors():
            raw = self._database.redis.hgetall(ControlKeys.org_keys(org_id))
        return sorted(
            (ApiKeyInfo(str(key_id), from_ms(json.loads(v)[1])) for key_id, v in raw.items()),
            key=lambda info: info.created_at,
        )

    def hashes(self, org_id: str) -> dict[str, str]:
        """``{key id: stored hash}`` of every key of ``org_id`` ({} without any)."""
        with database_errors():
            raw = self._database.redis.hgetall(ControlKeys.org_keys(org_id))
        return {str(key_id): str(json.loads(value)[0]) for key_id, value in raw.items()}

    def authenticate(self, api_key: str | None) -> Principal:
        """The principal behind ``api_key``; ``Unauthorized`` when missing, unknown or revoked."""
        if not api_key or len(api_key) > MAX_KEY_CHARS:
            raise Unauthorized(
                "Send your API key as 'Authorization: Bearer <key>'."
                if not api_key
                else "The API key is not valid."
            )
        with database_errors():
            found = self._database.redis.hmget(
                ControlKeys.api_key(hash_api_key(api_key)), "org_id", "key_id"
            )
        if found[0] is None:
            raise Unauthorized("The API key is not valid or has been revoked.")
        return Principal(org_id=str(found[0]), key_id=str(found[1]))
