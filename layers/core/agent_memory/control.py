"""The control plane: organizations, API keys and database instances.

API keys are 256-bit random tokens (``kvm_`` + 43 URL-safe characters). Only their SHA-256 is
stored: a fast hash is the right tool for high-entropy tokens (unlike passwords, they cannot be
guessed from a dictionary), and it lets a request be authenticated with one lookup.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

import redis

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.db import database_errors
from agent_memory.errors import InstanceNotFound, NotFound, Unauthorized, ValidationFailed
from agent_memory.keys import ControlKeys

ORG_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
INSTANCE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
KEY_PREFIX = "kvm_"
MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 512


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization an API key belongs to, and which key it was."""

    org_id: str
    key_id: str


@dataclass(frozen=True)
class Instance:
    """A database instance: its id, owning organization and connection URL (may hold a password)."""

    instance_id: str
    org_id: str
    url: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKeyInfo:
    key_id: str
    created_at: datetime


def hash_api_key(api_key: str) -> str:
    """Hex SHA-256 of the key's UTF-8 bytes; what the control plane stores instead of the key."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def _check(pattern: re.Pattern[str], kind: str, value: str) -> None:
    if not pattern.fullmatch(value):
        raise ValidationFailed(f"{kind} '{value}' must be 1-64 letters, digits, '_' or '-'.")


class ControlPlane:
    """Reads and writes the control database. Errors: ``Unauthorized``, ``InstanceNotFound``,
    ``NotFound``, ``ValidationFailed``, ``DatabaseUnavailable``."""

    def __init__(
        self, client: redis.Redis, clock: Clock, instance_cache_seconds: float = 0
    ) -> None:
        """``instance_cache_seconds`` > 0 keeps found instances that long in this process:
        records only change when an administrator re-points an instance, and every request
        looks one up. Missing instances are never cached, so a new one works at once."""
        self._redis = client
        self._clock = clock
        self._instance_cache_seconds = instance_cache_seconds
        self._instances: dict[tuple[str, str], tuple[float, Instance]] = {}

    # organizations

    def create_organization(self, org_id: str, name: str | None = None) -> bool:
        """Create ``org_id`` if new; returns True when it was created."""
        _check(ORG_ID, "organization id", org_id)
        doc = json.dumps({"name": name or org_id, "created_at": to_ms(self._clock.now())})
        with database_errors():
            return bool(self._redis.hsetnx(ControlKeys.organizations, org_id, doc))

    def organization_exists(self, org_id: str) -> bool:
        with database_errors():
            return bool(self._redis.hexists(ControlKeys.organizations, org_id))

    def list_organizations(self) -> list[str]:
        with database_errors():
            return sorted(str(org) for org in self._redis.hkeys(ControlKeys.organizations))

    def _require_org(self, org_id: str) -> None:
        if not self.organization_exists(org_id):
            raise NotFound(f"Organization '{org_id}' does not exist; create it first.")

    # API keys

    def issue_api_key(self, org_id: str) -> tuple[str, str]:
        """Make a new key for ``org_id``; returns ``(key_id, api_key)``. The key is shown once."""
        api_key = KEY_PREFIX + secrets.token_urlsafe(32)
        return self.register_api_key(org_id, api_key), api_key

    def register_api_key(self, org_id: str, api_key: str) -> str:
        """Accept a caller-chosen key (the local stack's ``KIVIDB_API_KEY``); returns its key id.

        Registering a key that already exists for the same organization returns its id again.
        """
        if not MIN_KEY_CHARS <= len(api_key) <= MAX_KEY_CHARS or not api_key.isprintable():
            raise ValidationFailed(
                f"An API key must be {MIN_KEY_CHARS}-{MAX_KEY_CHARS} printable characters."
            )
        self._require_org(org_id)
        digest = hash_api_key(api_key)
        with database_errors():
            existing = self._redis.hgetall(ControlKeys.api_key(digest))
            if existing:
                if existing["org_id"] != org_id:
                    raise ValidationFailed("That API key is already used by another organization.")
                return str(existing["key_id"])
            key_id = "key_" + secrets.token_hex(6)
            now = to_ms(self._clock.now())
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(
                ControlKeys.api_key(digest),
                mapping={"org_id": org_id, "key_id": key_id, "created_at": now},
            )
            pipe.hset(ControlKeys.org_keys(org_id), key_id, json.dumps([digest, now]))
            pipe.execute()
        return key_id

    def revoke_api_key(self, org_id: str, key_id: str) -> None:
        """Revoke at once: the next request with that key is a 401. ``NotFound`` if unknown."""
        with database_errors():
            raw = self._redis.hget(ControlKeys.org_keys(org_id), key_id)
            if raw is None:
                raise NotFound(f"Organization '{org_id}' has no API key '{key_id}'.")
            digest = json.loads(raw)[0]
            pipe = self._redis.pipeline(transaction=False)
            pipe.delete(ControlKeys.api_key(digest))
            pipe.hdel(ControlKeys.org_keys(org_id), key_id)
            pipe.execute()

    def list_api_keys(self, org_id: str) -> list[ApiKeyInfo]:
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.org_keys(org_id))
        return sorted(
            (ApiKeyInfo(str(key_id), from_ms(json.loads(v)[1])) for key_id, v in raw.items()),
            key=lambda info: info.created_at,
        )

    def authenticate(self, api_key: str | None) -> Principal:
        """The principal behind ``api_key``; ``Unauthorized`` when missing, unknown or revoked."""
        if not api_key or len(api_key) > MAX_KEY_CHARS:
            raise Unauthorized(
                "Send your API key as 'Authorization: Bearer <key>'."
                if not api_key
                else "The API key is not valid."
            )
        with database_errors():
            found = self._redis.hmget(
                ControlKeys.api_key(hash_api_key(api_key)), "org_id", "key_id"
            )
        if found[0] is None:
            raise Unauthorized("The API key is not valid or has been revoked.")
        return Principal(org_id=str(found[0]), key_id=str(found[1]))

    # instances

    def register_instance(self, org_id: str, instance_id: str, url: str) -> None:
        """Register (or re-point) ``instance_id`` for ``org_id``. An id owned by another
        organization is refused."""
        _check(INSTANCE_ID, "instance id", instance_id)
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValidationFailed(
                "An instance URL must start with redis://, rediss:// or unix://."
            )
        self._require_org(org_id)
        with database_errors():
            owner = self._redis.hget(ControlKeys.instance(instance_id), "org_id")
            if owner is not None and owner != org_id:
                raise ValidationFailed(f"Instance id '{instance_id}' is taken.")
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(
                ControlKeys.instance(instance_id),
                mapping={"org_id": org_id, "url": url},
            )
            pipe.hsetnx(ControlKeys.instance(instance_id), "created_at", to_ms(self._clock.now()))
            pipe.sadd(ControlKeys.org_instances(org_id), instance_id)
            pipe.execute()

    def instance(self, org_id: str, instance_id: str) -> Instance:
        """The instance, if it exists and belongs to ``org_id``; else ``InstanceNotFound``
        (the same answer in both cases, so ids of other organizations cannot be probed)."""
        if not INSTANCE_ID.fullmatch(instance_id):
            raise InstanceNotFound(instance_id)
        now = time.monotonic()
        cached = self._instances.get((org_id, instance_id))
        if cached is not None and now - cached[0] < self._instance_cache_seconds:
            return cached[1]
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.instance(instance_id))
        if not raw or raw.get("org_id") != org_id:
            raise InstanceNotFound(instance_id)
        instance = Instance(
            instance_id, org_id, str(raw["url"]), from_ms(str(raw.get("created_at", 0)))
        )
        if self._instance_cache_seconds > 0:
            self._instances[(org_id, instance_id)] = (now, instance)
        return instance

    def instance_by_id(self, instance_id: str) -> Instance:
        """The instance whatever its organization, for internal callers only (the background
        function, which the scheduler invokes with an instance id); ``InstanceNotFound``."""
        if not INSTANCE_ID.fullmatch(instance_id):
            raise InstanceNotFound(instance_id)
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.instance(instance_id))
        if not raw:
            raise InstanceNotFound(instance_id)
        return self.instance(str(raw["org_id"]), instance_id)

    def instances(self, org_id: str) -> list[Instance]:
        with database_errors():
            ids = sorted(str(i) for i in self._redis.smembers(ControlKeys.org_instances(org_id)))
        found = []
        for instance_id in ids:
            try:
                found.append(self.instance(org_id, instance_id))
            except InstanceNotFound:
                continue
        return found
