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
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.database.scripts import WRITES, load_script
from agent_memory.errors import KeyNotFound, Unauthorized, ValidationFailed
from agent_memory.models import Principal
from agent_memory.scopes import KeyScope

if TYPE_CHECKING:
    from agent_memory.control.database import ControlDatabase
    from agent_memory.control.key_models import KeyCreate, KeyCreated
    from agent_memory.control.organizations import Organizations

KEY_PREFIX = "kvm_"
MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 512


@dataclass(frozen=True)
class ApiKeyInfo:
    """An API key as listed: its id, when it was made, its name and scope (None: the
    organization's admin key). The key itself is not stored."""

    key_id: str
    created_at: datetime
    name: str | None = None
    scope: KeyScope | None = None

    @property
    def expires_ms(self) -> int | None:
        """When the key expires (ms since the epoch), None for never."""
        return self.scope.expires_at if self.scope is not None else None


def _info(key_id: str, raw: str) -> ApiKeyInfo:
    """An ``org:<org>:keys`` entry (``[hash, created ms, name?, scope JSON?]``) as listed."""
    entry = json.loads(raw)
    name = entry[2] if len(entry) > 2 else None
    scope = KeyScope.from_text(entry[3]) if len(entry) > 3 and entry[3] else None
    return ApiKeyInfo(key_id, from_ms(entry[1]), name, scope)


def hash_api_key(api_key: str) -> str:
    """Hex SHA-256 of the key's UTF-8 bytes; what the control plane stores instead of the key."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


REVOKE = (
    WRITES
    + """
-- KEYS: the organization's keys (hash key id -> entry), the key's record, the organization's
-- expiring keys (zset). ARGV: key id, its
-- hash, the key id of the request's own key ('' for none). Revokes the key in one step, and
-- only while the caller's key is still one of the organization's: 'revoked', 'missing' (no
-- such key now) or 'revoked_caller' (nothing done).
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry or cjson.decode(entry)[1] ~= ARGV[2] then return 'missing' end
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 0 then
  return 'revoked_caller'
end
redis.call('DEL', KEYS[2])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 'revoked'
"""
)

RECORD_KEPT_MS = 86_400_000
"""How long an expired key's record outlives its expiry: a day, in which its requests are told
when it expired (then: that it is not valid). The database removes it then (``PEXPIREAT``,
set when the key is made); the key leaves the listing at its expiry (``ApiKeys.live``)."""
PURGE_BATCH = 1_000
"""Expired keys purged from the listing in one step (``ApiKeys.purge``)."""
MAX_PURGED = 20_000
"""Expired keys purged by one listing at most (the first after the pattern of a key per end
user has left tens of thousands): about 2 s on a loaded 2-core machine, well within the
function's 10 s; the next listings purge the rest."""


SEEN_KEYS = 1024
"""Keys whose record a container remembers (``ApiKeys.seen``), least recently used dropped."""


@dataclass(frozen=True)
class SeenKey:
    """What an API key's record (``record``, ``ControlKeys.api_key``) said when this container
    last read it: the principal, and the scope as stored (empty for none)."""

    record: str
    principal: Principal
    scope_text: str


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
        self._seen: OrderedDict[str, SeenKey] = OrderedDict()

    @property
    def _organizations(self) -> Organizations:
        if self._given_organizations is None:
            from agent_memory.control.organizations import Organizations

            self._given_organizations = Organizations(self._database, self._clock)
        return self._given_organizations

    def issue(
        self,
        org_id: str,
        scope: KeyScope | None = None,
        name: str | None = None,
        created_ms: int | None = None,
    ) -> tuple[str, str]:
        """Make a new key for ``org_id`` (limited to ``scope``, or its admin key without one),
        made at ``created_ms`` (now by default); returns ``(key_id, api_key)``. The key is shown
        once."""
        api_key = KEY_PREFIX + secrets.token_urlsafe(32)
        return self.register(org_id, api_key, scope, name, created_ms), api_key

    def register(
        self,
        org_id: str,
        api_key: str,
        scope: KeyScope | None = None,
        name: str | None = None,
        created_ms: int | None = None,
    ) -> str:
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
            now = created_ms if created_ms is not None else to_ms(self._clock.now())
            scope_text = scope.to_text() if scope is not None else None
            entry: list[object] = [digest, now]
            if scope is not None or name is not None:
                entry += [name, scope_text]
            pipe = client.pipeline(transaction=False)
            pipe.hset(
                ControlKeys.api_key(digest),
                mapping={"org_id": org_id, "key_id": key_id, "created_at": now},
            )
            if scope_text is not None:  # the authorizer reads it with the organization
                pipe.hset(ControlKeys.api_key(digest), "scope", scope_text)
            pipe.hset(ControlKeys.org_keys(org_id), key_id, json.dumps(entry))
            if scope is not None and scope.expires_at is not None:
                pipe.zadd(ControlKeys.org_key_expiry(org_id), {key_id: scope.expires_at})
                pipe.pexpireat(ControlKeys.api_key(digest), scope.expires_at + RECORD_KEPT_MS)
            pipe.execute()
        return key_id

    def create(self, org_id: str, body: KeyCreate, instances: set[str]) -> KeyCreated:
        """A new key of ``org_id`` limited as ``body`` says (``POST /keys``), shown once.
        ``instances``: the organization's instance ids; a limit naming another is 422, as is
        an expiry that has passed."""
        from agent_memory.control.key_models import KeyCreated, scope_view
        from agent_memory.scopes import StoreRef

        named = [("instances", i) for i in body.instances or []] + [
            ("stores", s.instance_id) for s in body.stores or []
        ]
        unknown = [(field, i) for field, i in named if i not in instances]
        if unknown:
            field, instance = unknown[0]  # reported under the field that names it
            raise ValidationFailed(
                f"Instance '{instance}' (in '{field}') is not one of your organization's.",
                details=[{"field": field, "problem": f"unknown instance {instance}"}],
            )
        now = self._clock.now()
        if body.expires_at is not None and body.expires_at <= now:
            raise ValidationFailed(
                "expires_at has passed; give a time in the future.",
                details=[{"field": "expires_at", "problem": "must be in the future"}],
            )
        scope = KeyScope(
            access=body.access,
            instances=tuple(body.instances) if body.instances is not None else None,
            stores=tuple(StoreRef(instance_id=s.instance_id, store=s.store) for s in body.stores)
            if body.stores is not None
            else None,
            actors=tuple(body.actors) if body.actors is not None else None,
            expires_at=to_ms(body.expires_at) if body.expires_at is not None else None,
        )
        key_id, api_key = self.issue(org_id, scope, body.name, to_ms(now))
        view = scope_view(key_id, from_ms(to_ms(now)), body.name, scope)
        return KeyCreated(**view.model_dump(), api_key=api_key)

    def revoke(self, org_id: str, key_id: str, by: str | None = None) -> None:
        """Revoke at once: the next request with that key is a 401. ``NotFound`` if the
        organization does not exist (said so) or has no such key.

        ``by``: the key id of the request's own key (None for the operator's tool). The key is
        then revoked only while ``by`` is still a key of the organization, checked in the same
        step (``REVOKE``), else ``Unauthorized`` and nothing is revoked: two admin keys that
        revoke each other at the same moment leave one of them (the organization keeps an
        admin key whatever the timing; two requests checked one after the other once left 4
        of 8 organizations with none, issue 32)."""
        client = self._database.redis
        keys = ControlKeys.org_keys(org_id)
        with database_errors():
            raw = client.hget(keys, key_id)
            if raw is None:
                self._organizations.require(org_id)
                raise KeyNotFound(org_id, key_id)
            digest = str(json.loads(raw)[0])
            done = load_script(client, REVOKE)(
                keys=[keys, ControlKeys.api_key(digest), ControlKeys.org_key_expiry(org_id)],
                args=[key_id, digest, by or ""],
            )
        outcome = done.decode() if isinstance(done, bytes) else str(done)
        if outcome == "missing":  # revoked meanwhile by another request
            raise KeyNotFound(org_id, key_id)
        if outcome == "revoked_caller":
            raise Unauthorized(
                "The API key making this request was revoked meanwhile; nothing was revoked."
            )

    def of(self, org_id: str) -> list[ApiKeyInfo]:
        """The key ids of ``org_id`` with their creation times, oldest first (the keys
        themselves are not stored), expired ones too; ``NotFound`` without the organization."""
        self._organizations.require(org_id)
        with database_errors():
            raw = self._database.redis.hgetall(ControlKeys.org_keys(org_id))
        return sorted(
            (_info(str(key_id), str(v)) for key_id, v in raw.items()),
            key=lambda info: (info.created_at, info.key_id),
        )

    def live(self, org_id: str) -> list[ApiKeyInfo]:
        """The keys of ``org_id`` that have not expired, oldest first, after purging the
        expired ones from the listing (``purge``, up to ``MAX_PURGED``; one expired before the
        expiry index existed is purged when found here), so that what is read is the live keys
        only. ``NotFound`` without the organization."""
        now_ms = to_ms(self._clock.now())
        purged = PURGE_BATCH
        total = 0
        while purged == PURGE_BATCH and total < MAX_PURGED:
            purged = self.purge(org_id, now_ms, PURGE_BATCH)
            total += purged
        infos = self.of(org_id)
        stale = [i.key_id for i in infos if i.expires_ms is not None and i.expires_ms <= now_ms]
        if stale and total < MAX_PURGED:
            self._remove(org_id, stale[: MAX_PURGED - total], now_ms)
        return [i for i in infos if i.expires_ms is None or i.expires_ms > now_ms]

    def purge(self, org_id: str, now_ms: int, most: int = PURGE_BATCH) -> int:
        """Remove from the listing up to ``most`` keys of ``org_id`` that expired by ``now_ms``
        (``_remove``); returns how many it removed."""
        index = ControlKeys.org_key_expiry(org_id)
        with database_errors():
            found = self._database.redis.zrangebyscore(index, "-inf", now_ms, 0, most)
        ids = [str(key_id) for key_id in found]
        if ids:
            self._remove(org_id, ids, now_ms)
        return len(ids)

    def _remove(self, org_id: str, key_ids: list[str], now_ms: int) -> None:
        """Remove the expired ``key_ids`` of ``org_id`` from the listing and the expiry index,
        and make sure each one's record ends ``RECORD_KEPT_MS`` after its expiry (at once when
        that has passed; a key made before records were given an end gets one here). One
        already gone is skipped. In steps of ``PURGE_BATCH``."""
        client = self._database.redis
        listing, index = ControlKeys.org_keys(org_id), ControlKeys.org_key_expiry(org_id)
        with database_errors():
            for start in range(0, len(key_ids), PURGE_BATCH):
                ids = key_ids[start : start + PURGE_BATCH]
                entries = client.hmget(listing, ids)
                pipe = client.pipeline(transaction=False)
                for key_id, raw in zip(ids, entries, strict=True):
                    if raw is None:
                        continue
                    info = _info(key_id, str(raw))
                    record = ControlKeys.api_key(str(json.loads(raw)[0]))
                    ends = (info.expires_ms or now_ms) + RECORD_KEPT_MS
                    if ends <= now_ms:
                        pipe.delete(record)
                    else:
                        pipe.pexpireat(record, ends)
                pipe.hdel(listing, *ids)
                pipe.zrem(index, *ids)
                pipe.execute()

    def hashes(self, org_id: str) -> dict[str, str]:
        """``{key id: stored hash}`` of every key of ``org_id`` ({} without any)."""
        with database_errors():
            raw = self._database.redis.hgetall(ControlKeys.org_keys(org_id))
        return {str(key_id): str(json.loads(value)[0]) for key_id, value in raw.items()}

    def authenticate(self, api_key: str | None) -> Principal:
        """The principal behind ``api_key``; ``Unauthorized`` when missing, unknown or revoked.
        The key's record is read every time; what it said is remembered (``seen``)."""
        if not api_key or len(api_key) > MAX_KEY_CHARS:
            raise Unauthorized(
                "Send your API key as 'Authorization: Bearer <key>'."
                if not api_key
                else "The API key is not valid."
            )
        record = ControlKeys.api_key(hash_api_key(api_key))
        with database_errors():
            found = self._database.redis.hmget(record, "org_id", "key_id", "scope")
        if found[0] is None:
            self._seen.pop(record, None)
            raise Unauthorized("The API key is not valid or has been revoked.")
        scope_text = str(found[2] or "")
        scope = KeyScope.from_text(scope_text) if scope_text else None
        principal = Principal(org_id=str(found[0]), key_id=str(found[1]), scope=scope)
        self._check_expiry(principal)
        self._seen[record] = SeenKey(record, principal, scope_text)
        self._seen.move_to_end(record)
        while len(self._seen) > SEEN_KEYS:
            self._seen.popitem(last=False)
        return principal

    def seen(self, api_key: str) -> SeenKey | None:
        """What ``authenticate`` last read for ``api_key`` in this container, unchecked (the
        caller checks it against the record in the step it takes: ``LimitStore.take``'s
        ``key_record``), or None. ``Unauthorized`` when that says the key has expired."""
        if not api_key or len(api_key) > MAX_KEY_CHARS:
            return None
        found = self._seen.get(ControlKeys.api_key(hash_api_key(api_key)))
        if found is not None:
            self._check_expiry(found.principal)
        return found

    def forget(self, seen: SeenKey) -> None:
        """Drop what ``seen`` returned (the record no longer says it)."""
        self._seen.pop(seen.record, None)

    def _check_expiry(self, principal: Principal) -> None:
        expires = principal.scope.expires_at if principal.scope is not None else None
        if expires is not None and to_ms(self._clock.now()) >= expires:
            raise Unauthorized(
                f"The API key expired at {from_ms(expires).isoformat()}; ask for a new one."
            )
