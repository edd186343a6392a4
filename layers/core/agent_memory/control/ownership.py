"""Which database an instance URL names, and the ownership marker inside that database: the
two facts the registry (``control.instances.InstanceRegistry``) guards "one database, one instance"
with (docs/design.md, "One database, one instance").

- :func:`database_address`: the normalized address of the database a URL names, the same for
  every spelling of it; the registry's address index in the control database is keyed by it.
- the ownership marker (``InstanceKeys.owner``), written in the database itself, which catches
  the aliases no normalization can: its value ``<org>/<instance>/<token>`` (``marker_value``),
  the scripts that claim, confirm, release and take it back, and :func:`refuse_foreign_data`,
  which refuses a database whose data is not known to be the registering organization's.

Separate from ``instances`` because none of it touches the control database: it reads a URL,
or talks to the instance's own database.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import socket
from collections.abc import Callable
from typing import Any, Literal

import redis
from redis.connection import parse_url

from agent_memory.database.client import database_errors, redis_client, split_cluster_option
from agent_memory.database.keys import PREFIX, PROBE_KEY, InstanceKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import DatabaseUnavailable, InstanceConflict, ValidationFailed

DEFAULT_PORT = 6379
"""The port of ``redis://`` and ``rediss://`` URLs without one (redis-py's default)."""
CLAIM_PENDING_MS = 60_000
"""A marker written at the start of a registration expires after this long unless the
registration, once in the control database, confirms it (a registration takes milliseconds)."""
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
"""Hosts that may be an IPv4 address in one of the forms inet_aton(3) and getaddrinfo(3) accept
(``127.1``, ``0x7f.0.0.1``, ``2130706433``)."""


def _host(raw: str) -> str:
    """A host as one spelling: lower case, no trailing dot, IDNA (what ``socket`` sends to the
    resolver), IP literals in their compressed form, IPv4-mapped IPv6 as IPv4, and every
    loopback or unspecified address (127.0.0.0/8, ``::1``, ``0.0.0.0``, ``::``) and the
    ``localhost`` names (RFC 6761, section 6.3) as ``localhost``. Names are not resolved: DNS
    answers change, and one address may serve many databases by name (TLS SNI)."""
    host = raw.lower().rstrip(".")
    if not host:
        raise ValidationFailed("An instance URL must name a host.")
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        address = None
        if _NUMERIC_HOST.fullmatch(host):
            try:
                address = ipaddress.IPv4Address(socket.inet_aton(host))
            except OSError:
                address = None
    if address is None:
        if host == "localhost" or host.endswith(".localhost"):
            return "localhost"
        try:
            return host.encode("idna").decode("ascii")
        except UnicodeError:
            return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return "localhost"
    return f"[{address}]" if address.version == 6 else str(address)


def database_address(url: str) -> str:
    """The normalized address of the database ``url`` names, the same for every spelling of it.

    ``redis://`` and ``rediss://``: ``redis://<host>:<port>/<db>``, the port 6379 when the URL has
    none, the database number from ``?db=N`` or else the path ``/N`` (0 when neither); read with
    redis-py's own ``parse_url``, so it is what the client connects to. User names, passwords, TLS
    and the ``cluster`` option (``database.client.split_cluster_option``) do not change the
    database; a cluster's address is the one of the node the URL names (another node of the same
    cluster is caught by the ownership marker, which lives in the cluster). ``unix://``:
    ``unix://<path>?db=<db>`` with the socket path normalized. The host is normalized by ``_host``.
    ``ValidationFailed`` for a URL that is not one of these or cannot be read.
    """
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValidationFailed("An instance URL must start with redis://, rediss:// or unix://.")
    url, _ = split_cluster_option(url)  # says how to talk to the database, not which one
    try:
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        port = int(options.get("port") or DEFAULT_PORT)
        db = int(options.get("db") or 0)
    except ValueError as exc:
        # parse_url's and urllib's messages name the bad part (a port, a db), never the password
        raise ValidationFailed(f"The instance URL cannot be read: {exc}") from exc
    if db < 0:
        raise ValidationFailed("The database number of an instance URL must be 0 or more.")
    if url.startswith("unix://"):
        path = str(options.get("path") or "")
        if not path:
            raise ValidationFailed("A unix:// instance URL must name the socket's path.")
        path = posixpath.normpath(path)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        return f"unix://{path}?db={db}"
    if not 0 < port < 65536:
        raise ValidationFailed("The port of an instance URL must be 1 to 65535.")
    return f"redis://{_host(str(options.get('host') or 'localhost'))}:{port}/{db}"


# Instance database scripts, on the ownership marker "<org>/<instance>/<token>": pending (with
# an expiry) from the claim until the registration confirms it; "<...>/released" with an
# expiry once released.

CLAIM = """
-- KEYS: the marker; ARGV: value, pending (ms), the value it may replace ('' none)
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then return {'ok'} end
if not current or current == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {'ok'}
end
return {'held', current, redis.call('PTTL', KEYS[1])}
"""

CONFIRM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PERSIST', KEYS[1])
return 1
"""

RELEASE = """
-- ARGV: value, hold (ms)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1] .. '/released', 'PX', ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
return 1
"""

UNDO = """
-- ARGV: value, the value to put back ('' none)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""

RELEASED = "/released"


def marker_value(org_id: str, instance_id: str, token: str) -> str:
    return f"{org_id}/{instance_id}/{token}"


class ForeignData(InstanceConflict):
    """The database already holds agent-memory data not known to be the registering
    organization's (:func:`refuse_foreign_data`)."""


def refuse_foreign_data(
    org_id: str, url: str, *, is_current: Callable[[str, str, str], bool] | None = None
) -> None:
    """``ForeignData`` (an ``InstanceConflict``) when the database at ``url`` holds
    agent-memory data (a key under ``kividb:mem:`` other than the ownership marker) that is
    not known to be ``org_id``'s: its ownership marker names another organization (a stale
    one: a live or recently released one is refused by the registration itself), or it has
    none (the marker of a registration released longer ago than its hold is gone, and data
    from before markers has none). Registering such a database would let ``org_id`` read that
    data, whatever it is; ``tools.admin register-instance`` asks for ``--adopt-existing-data``
    then (docs/design.md, "One database, one instance").

    Returns when there is no such data, when the marker is ``org_id``'s (current, or released
    by it), and when the database cannot be reached or used (``DatabaseUnavailable``: the
    registration then goes on without a marker, or refuses the database, as it does). One
    ``GET`` and a ``SCAN`` that stops at the first key found (every primary of a cluster).
    ``ValidationFailed`` for a URL that cannot be read.

    ``is_current(org, instance, token)`` (``InstanceRegistry.marker_is_current``) tells a
    marker of a registration that stands: such a marker, and one that expires (a registration
    being made, or one released moments ago), is left to the registration, which refuses the
    database with the message that says so (registered to another organization)."""
    address = database_address(url)
    try:
        client = redis_client(url)
        with database_errors():
            marker = client.get(InstanceKeys.owner)
            expiring = marker is not None and int(client.pttl(InstanceKeys.owner)) > 0
            ours = {InstanceKeys.owner, PROBE_KEY}
            found = next(
                (
                    key
                    for key in client.scan_iter(match=PREFIX + "*", count=1000)
                    if str(key) not in ours
                ),
                None,
            )
    except DatabaseUnavailable:
        return
    if found is None or (marker is not None and str(marker).split("/", 1)[0] == org_id):
        return
    parts = str(marker).removesuffix(RELEASED).split("/") if marker is not None else []
    if len(parts) == 3 and (expiring or (is_current is not None and is_current(*parts))):
        return
    raise ForeignData(
        f"Database {address} already holds agent-memory data (keys under {PREFIX}) that is "
        f"not known to be organization '{org_id}''s: its ownership marker names another "
        "organization, or it has none (a registration released earlier, or data from before "
        f"markers). Registering it would let '{org_id}' read that data: empty the database "
        "first, or adopt the data on purpose (tools.admin register-instance "
        "--adopt-existing-data). Nothing was registered."
    )


def confirm_marker(url: str, value: str) -> bool:
    """Make the pending marker ``value`` permanent; False when it is no longer there (it
    expired: the registration took longer than ``CLAIM_PENDING_MS``) or cannot be reached."""
    return _marker_script(url, CONFIRM, [value])


MarkerRelease = Literal["released", "absent", "unreached"]
"""What became of a registration's ownership marker when it let its database go: ``released``
(held as released for the hold, or deleted with none); ``absent``: the database answered, but
the marker there is not that one (none was ever written, or another registration replaced it);
``unreached``: the database could not be reached, or refused the URL's credentials or the
script, so a marker of that registration may still be in it."""


def release_marker(url: str, value: str, hold_ms: int) -> MarkerRelease:
    """Release the marker ``value`` (held for ``hold_ms``, or deleted with 0) if it is
    still the one in the database (see ``MarkerRelease``)."""
    try:
        client = redis_client(url)
        with database_errors():
            done = load_script(client, RELEASE)(keys=[InstanceKeys.owner], args=[value, hold_ms])
    except (DatabaseUnavailable, redis.ResponseError, TypeError):
        return "unreached"
    return "released" if done else "absent"


def undo_marker_claim(url: str, value: str, replaced: str, current: str) -> None:
    """Take back the pending marker ``value`` of a refused registration: put back
    ``replaced`` when it is ``current`` (the instance's registration that stands), else
    delete it."""
    _marker_script(url, UNDO, [value, replaced if replaced == current else ""])


def _marker_script(url: str, source: str, args: list[str | int]) -> bool:
    """Run a marker script in the database at ``url``; False when it answers 0 or cannot be
    reached (or refuses the script)."""
    try:
        client = redis_client(url)
        with database_errors():
            return bool(load_script(client, source)(keys=[InstanceKeys.owner], args=args))
    except (DatabaseUnavailable, redis.ResponseError, TypeError):
        return False
