"""The control plane: organizations, API keys and database instances.

API keys are 256-bit random tokens (``kvm_`` + 43 URL-safe characters). Only their SHA-256 is
stored: a fast hash is the right tool for high-entropy tokens (unlike passwords, they cannot be
guessed from a dictionary), and it lets a request be authenticated with one lookup.

Instances (registration, the guards that keep a database one organization's, look-ups) are
``instances.InstanceRegistry``, the base of ``ControlPlane``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from agent_memory.clock import from_ms, to_ms
from agent_memory.db import database_errors
from agent_memory.db_scripts import load_script
from agent_memory.errors import Conflict, NotFound, Unauthorized, ValidationFailed
from agent_memory.instances import (
    Instance,
    InstanceRegistry,
    Removal,
    check_id,
)
from agent_memory.keys import ControlKeys

ORG_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
KEY_PREFIX = "kvm_"
MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 512
_ATTEMPTS = 5


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization an API key belongs to, and which key it was."""

    org_id: str
    key_id: str


@dataclass(frozen=True)
class ApiKeyInfo:
    key_id: str
    created_at: datetime


@dataclass(frozen=True)
class OrganizationDeletion:
    """What ``delete_organization`` did: how many API keys it revoked, and the instances it
    removed."""

    org_id: str
    keys_revoked: int
    removed: list[Removal]


def hash_api_key(api_key: str) -> str:
    """Hex SHA-256 of the key's UTF-8 bytes; what the control plane stores instead of the key."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


_DELETE_ORG = """
-- KEYS: organizations, the org's key hash, then the record of each of its API keys
-- ARGV: org, then the key id of each record, in the same order
local ids = redis.call('HKEYS', KEYS[2])
if #ids ~= #ARGV - 1 then return -1 end
local given = {}
for i = 2, #ARGV do given[ARGV[i]] = true end
for _, id in ipairs(ids) do
  if not given[id] then return -1 end
end
redis.call('HDEL', KEYS[1], ARGV[1])
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[2])
return #KEYS - 2
"""


class ControlPlane(InstanceRegistry):
    """Reads and writes the control database: organizations and API keys here, instances in
    ``InstanceRegistry``. Errors: ``Unauthorized``, ``InstanceNotFound``, ``NotFound``,
    ``ValidationFailed``, ``InstanceConflict``, ``DatabaseUnavailable``."""

    # organizations

    def create_organization(self, org_id: str, name: str | None = None) -> bool:
        """Create ``org_id`` if new; returns True when it was created."""
        check_id(ORG_ID, "organization id", org_id)
        doc = json.dumps({"name": name or org_id, "created_at": to_ms(self._clock.now())})
        with database_errors():
            return bool(self._redis.hsetnx(ControlKeys.organizations, org_id, doc))

    def list_organizations(self) -> list[str]:
        with database_errors():
            return sorted(str(org) for org in self._redis.hkeys(ControlKeys.organizations))

    def _require_org(self, org_id: str) -> None:
        if not self.organization_exists(org_id):
            raise NotFound(f"Organization '{org_id}' does not exist; create it first.")

    def delete_organization(self, org_id: str) -> OrganizationDeletion:
        """Delete ``org_id``: the organization and all its API keys at once (one script: the
        next request with any of them is a 401), then each of its instances as
        ``remove_instance`` does (the data in their databases stays). Running it again after
        a failure half-way finishes the job. ``NotFound`` when there is nothing of
        ``org_id``."""
        check_id(ORG_ID, "organization id", org_id)
        script = load_script(self._redis, _DELETE_ORG)
        for _ in range(_ATTEMPTS):
            with database_errors():
                exists = self._redis.hexists(ControlKeys.organizations, org_id)
                keys = self._redis.hgetall(ControlKeys.org_keys(org_id))
                instance_ids = sorted(self._redis.smembers(ControlKeys.org_instances(org_id)))
            if not (exists or keys or instance_ids):
                raise NotFound(f"Organization '{org_id}' does not exist.")
            key_ids = sorted(keys)
            records = [ControlKeys.api_key(json.loads(keys[k])[0]) for k in key_ids]
            with database_errors():
                revoked = int(
                    script(
                        keys=[ControlKeys.organizations, ControlKeys.org_keys(org_id), *records],
                        args=[org_id, *key_ids],
                    )
                )
            if revoked >= 0:
                break
        else:
            raise Conflict(f"Organization '{org_id}' kept changing; retry.")
        removed = []
        for instance_id in instance_ids:
            try:
                removed.append(self._remove(org_id, str(instance_id)))
            except NotFound:
                continue
        with database_errors():
            self._redis.delete(ControlKeys.org_instances(org_id))
        for cached in [k for k in self._instances if k[0] == org_id]:
            del self._instances[cached]
        return OrganizationDeletion(org_id, revoked, removed)

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
        """Revoke at once: the next request with that key is a 401. ``NotFound`` if the
        organization does not exist (said so) or has no such key."""
        with database_errors():
            raw = self._redis.hget(ControlKeys.org_keys(org_id), key_id)
            if raw is None:
                self._require_org(org_id)
                raise NotFound(f"Organization '{org_id}' has no API key '{key_id}'.")
            digest = json.loads(raw)[0]
            pipe = self._redis.pipeline(transaction=False)
            pipe.delete(ControlKeys.api_key(digest))
            pipe.hdel(ControlKeys.org_keys(org_id), key_id)
            pipe.execute()

    def list_api_keys(self, org_id: str) -> list[ApiKeyInfo]:
        """The key ids of ``org_id`` with their creation times, oldest first (the keys
        themselves are not stored); ``NotFound`` without the organization."""
        self._require_org(org_id)
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.org_keys(org_id))
        return sorted(
            (ApiKeyInfo(str(key_id), from_ms(json.loads(v)[1])) for key_id, v in raw.items()),
            key=lambda info: info.created_at,
        )

    def list_instances(self, org_id: str) -> list[Instance]:
        """The instances of ``org_id``, by id, as ``instances`` reads them; ``NotFound``
        without the organization (where ``instances`` answers [])."""
        self._require_org(org_id)
        return self.instances(org_id)

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
