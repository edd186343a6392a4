"""Database instances: the registry of which database each instance of an organization is, in
the control database, and the guards that keep a database one registration's (docs/design.md,
"One database, one instance"):

- the address index in the control database: the normalized address of every instance
  (``control.ownership.database_address``) names the instance that holds it; a Lua script
  checks it and writes it with the instance record, so of two registrations of one address
  exactly one wins;
- an ownership marker inside the database itself (``InstanceKeys.owner``; its scripts are in
  ``control.ownership``), written when the database can be reached. It catches the aliases no
  normalization can (two DNS names for one server, a TCP port and a unix socket of one server).

Releasing a database (``remove_instance``, ``delete_organization``, re-pointing an instance)
keeps it reserved for the organization that released it for ``release_hold_seconds``: warm
functions may still use their cached instance record that long, and must not reach another
organization's data through it.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import redis

from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.control.models import INSTANCE_ID, Instance, Registration, Removal, check_id
from agent_memory.control.ownership import (
    CLAIM,
    CLAIM_PENDING_MS,
    RELEASED,
    MarkerRelease,
    confirm_marker,
    database_address,
    marker_value,
    release_marker,
    undo_marker_claim,
)
from agent_memory.database.client import (
    check_cluster_option,
    database_errors,
    redis_client,
)
from agent_memory.database.keys import ControlKeys, InstanceKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import (
    Conflict,
    CredentialsRefused,
    DatabaseRefused,
    DatabaseUnavailable,
    InstanceConflict,
    InstanceNotFound,
    NotFound,
    UnreachableDatabase,
    ValidationFailed,
)

if TYPE_CHECKING:
    from agent_memory.control.database import ControlDatabase
    from agent_memory.control.organizations import Organizations

DEFAULT_RELEASE_HOLD_SECONDS = 30.0
"""How long a released database stays reserved for the organization that released it: the
functions' default ``KIVIDB_INSTANCE_CACHE_SECONDS`` (``edge.settings.FunctionSettings``)."""
_ATTEMPTS = 5


# Control database scripts. Index values: "<org>/<instance>" held, "<org>/" held for the
# organization that released the address (with an expiry). Ids cannot hold "/".

_REGISTER = """
-- KEYS: instance record, the org's instance set, new address, old address, organizations
-- ARGV: org, instance, url, address, now (ms), token, expected address and token, hold (ms)
if redis.call('HEXISTS', KEYS[5], ARGV[1]) == 0 then return {'no_org'} end
local rec = redis.call('HMGET', KEYS[1], 'org_id', 'address', 'token')
if rec[1] and rec[1] ~= ARGV[1] then return {'id_taken'} end
if (rec[2] or '') ~= ARGV[7] or (rec[3] or '') ~= ARGV[8] then return {'changed'} end
local me = ARGV[1] .. '/' .. ARGV[2]
local holder = redis.call('GET', KEYS[3])
if holder and holder ~= me and holder ~= ARGV[1] .. '/' then
  local org, id = string.match(holder, '^([^/]*)/(.*)$')
  if org ~= ARGV[1] or id == '' then return {'taken'} end
  return {'same_org', id}
end
if ARGV[7] ~= '' and ARGV[7] ~= ARGV[4] and redis.call('GET', KEYS[4]) == me then
  if tonumber(ARGV[9]) > 0 then
    redis.call('SET', KEYS[4], ARGV[1] .. '/', 'PX', ARGV[9])
  else
    redis.call('DEL', KEYS[4])
  end
end
redis.call('HSET', KEYS[1], 'org_id', ARGV[1], 'url', ARGV[3], 'address', ARGV[4],
           'token', ARGV[6])
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[5])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], me)
return {'ok'}
"""

_UNREGISTER = """
-- KEYS: instance record, the org's instance set, its address
-- ARGV: org, instance, expected address and token, hold (ms)
local rec = redis.call('HMGET', KEYS[1], 'org_id', 'address', 'token')
if rec[1] ~= ARGV[1] then return 0 end
if (rec[2] or '') ~= ARGV[3] or (rec[3] or '') ~= ARGV[4] then return -1 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1] .. '/' .. ARGV[2] then
  if tonumber(ARGV[5]) > 0 then
    redis.call('SET', KEYS[3], ARGV[1] .. '/', 'PX', ARGV[5])
  else
    redis.call('DEL', KEYS[3])
  end
end
return 1
"""

_ADOPT = """
-- KEYS: instance record, its address; ARGV: org, instance, address, token
local rec = redis.call('HMGET', KEYS[1], 'org_id', 'address')
if rec[1] ~= ARGV[1] or rec[2] then return 1 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] .. '/' .. ARGV[2] then return 0 end
redis.call('SET', KEYS[2], ARGV[1] .. '/' .. ARGV[2])
redis.call('HSET', KEYS[1], 'address', ARGV[3], 'token', ARGV[4])
return 1
"""


class IndexedAddress(NamedTuple):
    """An address in the index of database addresses and the registration token that holds
    it ('' for none)."""

    address: str
    token: str


class InstanceRegistry:
    """The instances of the control database: register, re-point, remove and look up, with a
    warm cache of found instances. Errors: ``InstanceNotFound``, ``NotFound``,
    ``ValidationFailed``, ``InstanceConflict``, ``DatabaseUnavailable``."""

    def __init__(
        self,
        database: ControlDatabase,
        clock: Clock,
        organizations: Organizations,
        instance_cache_seconds: float = 0,
        *,
        release_hold_seconds: float = DEFAULT_RELEASE_HOLD_SECONDS,
    ) -> None:
        """``instance_cache_seconds`` > 0 keeps found instances that long in this process:
        records only change when an administrator re-points or removes an instance, and every
        request looks one up. Missing instances are never cached, so a new one works at once.

        ``release_hold_seconds``: how long a database an instance leaves (removed, re-pointed,
        its organization deleted) stays reserved for that organization; it should be at least
        the functions' ``instance_cache_seconds`` (0: released at once)."""
        self._database = database
        self._clock = clock
        self._organizations = organizations
        self._instance_cache_seconds = instance_cache_seconds
        self._hold_ms = int(release_hold_seconds * 1000)
        self._instances: dict[tuple[str, str], tuple[float, Instance]] = {}

    @property
    def _redis(self) -> redis.Redis:
        return self._database.redis

    def ids(self, org_id: str) -> list[str]:
        """The instance ids in ``org_id``'s set, sorted (records not read)."""
        with database_errors():
            return sorted(str(i) for i in self._redis.smembers(ControlKeys.org_instances(org_id)))

    def forget_organization(self, org_id: str) -> None:
        """Drop ``org_id``'s set of instances and every cached instance of it (its
        organization was deleted and its instances removed)."""
        with database_errors():
            self._redis.delete(ControlKeys.org_instances(org_id))
        for cached in [k for k in self._instances if k[0] == org_id]:
            del self._instances[cached]

    def register_instance(
        self, org_id: str, instance_id: str, url: str, *, allow_unreachable: bool = False
    ) -> Registration:
        """Register ``instance_id`` of ``org_id`` at ``url``, or re-point it there.

        Refused with ``InstanceConflict`` (and nothing changed, neither here nor in the database)
        when the database is another registration's: by its normalized address
        (:func:`database_address`), or by the ownership marker in the database (any alias); also
        when ``instance_id`` is another organization's. Registering the same database again for the
        same instance changes nothing. Re-pointing releases the database the instance leaves (held
        for ``org_id`` for ``release_hold_seconds``). A database that cannot be reached is
        registered without a marker. ``NotFound`` without the organization, ``ValidationFailed`` for
        a bad id or URL, and for a database that was reached but cannot be used
        (``database.connections.UsableConnection``: a database number it does not have, a refused
        handshake, not the Redis protocol): nothing changed. Refused credentials are registered
        without a marker, as a database that cannot be reached. ``ValidationFailed`` too for a URL
        whose ``cluster`` option contradicts the server (``database.client.check_cluster_option``:
        ``cluster=0`` of a cluster node would read as unreachable and release the marker of the
        instance's own cluster).
        """
        check_id(INSTANCE_ID, "instance id", instance_id)
        address = database_address(url)
        check_cluster_option(url)  # a cluster told cluster=0 would read as unreachable
        self._organizations.require(org_id)
        warnings = self._index_existing()
        for _ in range(_ATTEMPTS):
            record = self._record(instance_id)
            owner = record.get("org_id")
            if owner is not None and owner != org_id:
                raise InstanceConflict(
                    f"Instance id '{instance_id}' is another organization's; choose another id."
                )
            old_address, old_token = record.get("address", ""), record.get("token", "")
            same = old_address == address and old_token != ""
            token = old_token if same else secrets.token_hex(8)
            self._check_index(org_id, instance_id, address)
            marked, replaced = self._claim(url, org_id, instance_id, token, address)
            if not marked and not allow_unreachable:
                raise UnreachableDatabase(
                    f"Database {address} cannot be reached right now (or refused the URL's "
                    "credentials), so its ownership marker cannot be written: nothing was "
                    "registered. Register it once it answers, or on purpose without the marker "
                    "(tools.admin register-instance --allow-unreachable): its first use then "
                    "writes the marker, or refuses the database if another registration holds it."
                )
            reply = self._write(
                org_id,
                instance_id,
                url,
                IndexedAddress(address, token),
                IndexedAddress(old_address, old_token),
                self._hold_ms,
            )
            if reply[0] == "ok":
                break
            if marked and not same:
                # take the claim back; a marker of this instance's current registration (an
                # alias of the same database) is put back as it was
                current = marker_value(org_id, instance_id, old_token) if old_token else ""
                undo_marker_claim(url, marker_value(org_id, instance_id, token), replaced, current)
            if reply[0] != "changed":
                raise self._refusal(reply[0], org_id, instance_id, address, [*reply, ""][1])
        else:
            raise Conflict(f"Instance '{instance_id}' kept changing; retry.")
        self._instances.pop((org_id, instance_id), None)
        if marked and not confirm_marker(url, marker_value(org_id, instance_id, token)):
            marked = self._reclaim(org_id, instance_id, url, address, token, record)
        released, released_marker = None, None
        if old_address and old_address != address:
            released = old_address
            released_marker = (
                release_marker(
                    record["url"], marker_value(org_id, instance_id, old_token), self._hold_ms
                )
                if old_token
                else "absent"  # registered before markers: it never wrote one
            )
        return Registration(
            instance_id, not record, address, released, marked, warnings, released_marker
        )

    def _record(self, instance_id: str) -> dict[str, str]:
        """The instance record's fields ({} when there is none)."""
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.instance(instance_id))
        return {str(name): str(value) for name, value in raw.items()}

    def _write(
        self,
        org_id: str,
        instance_id: str,
        url: str,
        new: IndexedAddress,
        old: IndexedAddress,
        hold_ms: int,
    ) -> list[Any]:
        """Run ``_REGISTER``: check the index and write the record (``url``, ``new``'s
        address and token, in place of ``old``'s) and the index in one step."""
        (address, token), (old_address, old_token) = new, old
        script = load_script(self._redis, _REGISTER)
        new_key = ControlKeys.address(address)
        with database_errors():
            reply: list[Any] = script(
                keys=[
                    ControlKeys.instance(instance_id),
                    ControlKeys.org_instances(org_id),
                    new_key,
                    ControlKeys.address(old_address) if old_address else new_key,
                    ControlKeys.organizations,
                ],
                args=[
                    org_id,
                    instance_id,
                    url,
                    address,
                    to_ms(self._clock.now()),
                    token,
                    old_address,
                    old_token,
                    hold_ms,
                ],
            )
        return [str(part) for part in reply]

    def _check_index(self, org_id: str, instance_id: str, address: str) -> None:
        """Refuse before anything is written (not even a marker) when the index already has
        ``address`` for another registration; ``_REGISTER`` checks again, atomically."""
        with database_errors():
            holder = self._redis.get(ControlKeys.address(address))
        if holder is None or holder in (f"{org_id}/{instance_id}", f"{org_id}/"):
            return
        holder_org, _, holder_id = str(holder).partition("/")
        kind = "same_org" if holder_org == org_id and holder_id else "taken"
        raise self._refusal(kind, org_id, instance_id, address, holder_id)

    def _refusal(
        self, kind: str, org_id: str, instance_id: str, address: str, holder_id: str = ""
    ) -> Exception:
        """The error of a refused registration; ``kind`` is a ``_REGISTER`` reply or
        ``pending``. Only the caller's own organization and instances are ever named."""
        if kind == "no_org":
            return NotFound(f"Organization '{org_id}' does not exist; create it first.")
        if kind == "id_taken":
            return InstanceConflict(
                f"Instance id '{instance_id}' is another organization's; choose another id."
            )
        if kind == "same_org":
            return InstanceConflict(
                f"Database {address} is already instance '{holder_id}' of organization "
                f"'{org_id}'; a database can be registered once: re-point or remove that "
                "instance instead."
            )
        if kind == "pending":
            return InstanceConflict(
                f"Database {address} is being registered as instance '{holder_id}' of "
                f"organization '{org_id}' right now; retry in a minute."
            )
        return InstanceConflict(
            f"Database {address} is registered to another organization (or was released by "
            "one less than a minute ago); a database can belong to one organization only."
        )

    def marker_is_current(self, org_id: str, instance_id: str, token: str) -> bool:
        """Whether the ownership marker ``org/instance/token`` is a registration of this
        control database that stands (for :func:`refuse_foreign_data`)."""
        return self._live(org_id, instance_id, token)

    def _live(self, org_id: str, instance_id: str, token: str) -> bool:
        """Whether the marker ``org/instance/token`` is a current registration."""
        if not INSTANCE_ID.fullmatch(instance_id):
            return False
        with database_errors():
            found = self._redis.hmget(ControlKeys.instance(instance_id), "org_id", "token")
        return found[0] == org_id and found[1] == token

    def _claim(
        self, url: str, org_id: str, instance_id: str, token: str, address: str
    ) -> tuple[bool, str]:
        """Write the pending ownership marker ``org/instance/token`` in the database at ``url``.

        Returns ``(marked, replaced)``: ``marked`` True when the marker is there (or already
        was), False when the database cannot be reached, refuses the URL's credentials or
        refuses the script (an ACL without ``EVAL``, say): the registration goes on without a
        marker; ``replaced``, the marker it took the place of ('' none). ``ValidationFailed``
        when the client refuses the URL's options, and when the database was reached but no
        usable connection could be made to it (``DatabaseRefused``: handshake, database
        number, not the Redis protocol). ``InstanceConflict`` when the marker is another
        registration's: one that is current (its record in this control database has the
        marker's token), one being made now (pending), or another organization's released
        moments ago (held). A marker of the same instance, or one whose registration is gone,
        is replaced.
        """
        value = marker_value(org_id, instance_id, token)
        replace = ""
        for _ in range(_ATTEMPTS):
            try:
                client = redis_client(url)
                with database_errors():
                    reply = load_script(client, CLAIM)(
                        keys=[InstanceKeys.owner], args=[value, CLAIM_PENDING_MS, replace]
                    )
            except CredentialsRefused:
                return False, ""  # as unreachable: the credentials may be set later
            except DatabaseRefused as exc:  # reached, but no usable connection: refuse it
                raise ValidationFailed(f"{exc.message} Nothing was registered.") from exc
            except (DatabaseUnavailable, redis.ResponseError):
                return False, ""
            except TypeError as exc:  # an option in the URL's query that the client lacks
                raise ValidationFailed(
                    f"The instance URL has an option the client does not accept: {exc}"
                ) from exc
            if str(reply[0]) == "ok":
                return True, replace
            current, expiring = str(reply[1]), int(reply[2]) > 0
            released = current.endswith(RELEASED)
            parts = current.removesuffix(RELEASED).split("/")
            replace = current
            if len(parts) != 3:
                continue  # not a marker of ours: replace it
            holder_org, holder_id, holder_token = parts
            if (holder_org, holder_id) == (org_id, instance_id):
                continue
            if expiring and not released:
                kind = "pending" if holder_org == org_id else "taken"
                raise self._refusal(kind, org_id, instance_id, address, holder_id)
            if expiring and holder_org != org_id:
                raise self._refusal("taken", org_id, instance_id, address)
            if not expiring and self._live(holder_org, holder_id, holder_token):
                kind = "same_org" if holder_org == org_id else "taken"
                raise self._refusal(kind, org_id, instance_id, address, holder_id)
        raise InstanceConflict(f"The ownership marker in database {address} kept changing; retry.")

    def _reclaim(
        self,
        org_id: str,
        instance_id: str,
        url: str,
        address: str,
        token: str,
        before: dict[str, str],
    ) -> bool:
        """The pending marker expired before it was confirmed: claim it again. If another
        registration took the database meanwhile, undo this one (back to ``before``, the record
        as it was) and raise its ``InstanceConflict``."""
        try:
            marked, _ = self._claim(url, org_id, instance_id, token, address)
        except InstanceConflict:
            if before.get("url"):
                self._write(
                    org_id,
                    instance_id,
                    before["url"],
                    IndexedAddress(
                        before.get("address") or database_address(before["url"]),
                        before.get("token", ""),
                    ),
                    IndexedAddress(address, token),
                    0,
                )
            else:
                self._unregister(org_id, instance_id, address, token, 0)
            raise
        return marked and confirm_marker(url, marker_value(org_id, instance_id, token))

    def _unregister(
        self, org_id: str, instance_id: str, address: str, token: str, hold_ms: int
    ) -> int:
        """Run ``_UNREGISTER``: 1 removed, 0 not ``org_id``'s, -1 changed since it was read."""
        script = load_script(self._redis, _UNREGISTER)
        record_key = ControlKeys.instance(instance_id)
        with database_errors():
            return int(
                script(
                    keys=[
                        record_key,
                        ControlKeys.org_instances(org_id),
                        ControlKeys.address(address) if address else record_key,
                    ],
                    args=[org_id, instance_id, address, token, hold_ms],
                )
            )

    def remove_instance(self, org_id: str, instance_id: str) -> Removal:
        """Unregister ``instance_id`` of ``org_id``: its record, its place in the
        organization, its address (held for ``org_id`` for ``release_hold_seconds``) and its
        ownership marker (when the database can be reached). The data in the database stays.
        Warm functions that cached the record may still use it for their
        ``instance_cache_seconds``. ``NotFound`` without the organization or the instance."""
        self._organizations.require(org_id)
        return self.remove(org_id, instance_id)

    def remove(self, org_id: str, instance_id: str) -> Removal:
        """``remove_instance`` without the check that the organization exists (for the
        deletion of that organization, which removes its record first)."""
        for _ in range(_ATTEMPTS):
            record = self._record(instance_id) if INSTANCE_ID.fullmatch(instance_id) else {}
            if record.get("org_id") != org_id:
                raise NotFound(f"Organization '{org_id}' has no instance '{instance_id}'.")
            address, token = record.get("address", ""), record.get("token", "")
            done = self._unregister(org_id, instance_id, address, token, self._hold_ms)
            if done == 0:
                raise NotFound(f"Organization '{org_id}' has no instance '{instance_id}'.")
            if done == 1:
                break
        else:
            raise Conflict(f"Instance '{instance_id}' kept changing; retry.")
        self._instances.pop((org_id, instance_id), None)
        url = record["url"]
        # a record without a token was registered before markers: it never wrote one
        marker: MarkerRelease = (
            release_marker(url, marker_value(org_id, instance_id, token), self._hold_ms)
            if token
            else "absent"
        )
        if not address:  # a record from before the address index
            try:
                address = database_address(url)
            except ValidationFailed:
                address = ""
        return Removal(instance_id, url, address, marker)

    def _index_existing(self) -> list[str]:
        """Index the instances registered before the address index existed (once: a flag key
        says when every record has its address). Returns a warning for each such instance
        whose database another instance already holds (the sharing the index now refuses);
        those stay unindexed, and are reported again, until an administrator removes one."""
        with database_errors():
            if self._redis.get(ControlKeys.address_index_complete):
                return []
        script = load_script(self._redis, _ADOPT)
        warnings = []
        prefix = ControlKeys.instance("")
        with database_errors():
            for key in self._redis.scan_iter(match=ControlKeys.instance_pattern, count=500):
                record = {str(k): str(v) for k, v in self._redis.hgetall(key).items()}
                if not record.get("url") or record.get("address"):
                    continue
                instance_id, org_id = str(key).removeprefix(prefix), record.get("org_id", "")
                try:
                    address = database_address(record["url"])
                except ValidationFailed:
                    warnings.append(f"instance '{instance_id}' has a URL that cannot be read")
                    continue
                keys = [str(key), ControlKeys.address(address)]
                args = [org_id, instance_id, address, secrets.token_hex(8)]
                if not script(keys=keys, args=args):
                    holder = str(self._redis.get(ControlKeys.address(address)))
                    warnings.append(
                        f"instance '{instance_id}' of organization '{org_id}' and "
                        f"'{holder}' ('<organization>/<instance>') share database {address}; "
                        "remove one of them"
                    )
            if not warnings:
                self._redis.set(ControlKeys.address_index_complete, "1")
        return warnings

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
            instance_id,
            org_id,
            str(raw["url"]),
            from_ms(str(raw.get("created_at", 0))),
            str(raw.get("token", "")),
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
        """The instances of ``org_id``, by id (read from the organization's set each time, so a
        removed instance is not listed even while a warm cache still has its record)."""
        with database_errors():
            ids = sorted(str(i) for i in self._redis.smembers(ControlKeys.org_instances(org_id)))
        found = []
        for instance_id in ids:
            try:
                found.append(self.instance(org_id, instance_id))
            except InstanceNotFound:
                continue
        return found
