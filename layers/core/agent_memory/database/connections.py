"""Setting up a connection to a single Redis-protocol server, step by step, so that a server
that answers but cannot be used says why.

redis-py's own connection setup sends ``HELLO 3`` (with ``AUTH``), the client name, a ``PING`` and
``SELECT`` as one step, and anything unexpected in the answers surfaces as whatever Python error its
parsing meets. :class:`UsableConnection` runs the same handshake, then ``SELECT`` on its own, and
raises :class:`HandshakeFailed` naming the step that was refused
(``database.client.database_errors`` makes it ``DatabaseRefused``: a 503 naming the reason, never
the URL). Separate from ``client`` (clients and error mapping) because it is redis-py connection
plumbing with its own reasons; ``client`` picks :func:`connection_class` for every single-node
client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis
from redis.connection import AbstractConnection
from redis.utils import str_if_bytes

from agent_memory.database.keys import PREFIX
from agent_memory.errors import (
    AgentMemoryError,
    CredentialsRefused,
    DatabaseRefused,
    InstanceNotFound,
)
from agent_memory.observability import logger

DATABASE_NUMBER_REFUSED = (
    "The database refused the database number of its URL (SELECT: the server has no such "
    "database, or it is a cluster, which has only database 0); an administrator must fix the "
    "URL."
)
HANDSHAKE_REFUSED = (
    "The database refused the connection handshake (HELLO 3: Redis 6 or later, or Valkey, is "
    "needed); an administrator must upgrade or replace it."
)
CREDENTIALS_REFUSED = (
    "The database refused the credentials of its URL (AUTH); an administrator must fix the URL."
)
OWNERSHIP_UNREADABLE = (
    "The database refused the reading or writing of its ownership marker (an ACL without GET, "
    "SET or SCAN on kividb:mem: keys?); an administrator must grant them."
)
NOT_REDIS_PROTOCOL = (
    "The database does not answer in the Redis protocol (RESP); an administrator must check "
    "what listens at its address."
)


class HandshakeFailed(redis.ConnectionError):
    """Setting up a new connection failed although the server was reached
    (:class:`UsableConnection`): ``message`` (one of the module's ``*_REFUSED`` texts or
    ``NOT_REDIS_PROTOCOL``) says which step; :func:`database_errors` makes it ``domain``
    (``DatabaseRefused``, or ``CredentialsRefused`` for credentials), or raises ``error`` when
    one is given (an :class:`OwnerGuard`'s refusal)."""

    def __init__(
        self,
        message: str,
        domain: type[DatabaseRefused] = DatabaseRefused,
        *,
        error: AgentMemoryError | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.domain = domain
        self.error = error


@dataclass(frozen=True)
class OwnerGuard:
    """What a database must hold to be used for one registration: ``value`` under ``key`` (an
    instance's ownership marker, ``control.ownership``). Checked on every new connection of a
    single-node client made with it (``redis_client(url, guard=...)``: the first use in a
    container, and every reconnect after it), and when a cluster client is made.

    ``check``: the key holds ``value`` (with an expiry or not): the database is the
    registration's. It holds anything else: refused, with ``InstanceNotFound(instance_id)``,
    the answer a stranger's instance gets, and a warning in the log for the operator (naming
    the other registration's organization and instance, never its token). It holds nothing:
    the first use of a database registered while it could not be reached; the value is
    written (``SET NX``) when the database holds no other data under ``PREFIX``, else refused
    (data whose owner is unknown is nobody's to read). One ``GET`` per new connection; the
    ``SCAN`` only on that first use."""

    key: str
    value: str
    instance_id: str
    others: frozenset[str]
    """Keys under ``PREFIX`` that are not data (the marker itself, the scripts' probe key)."""

    def check(self, send: Callable[..., Any], holds_data: Callable[[], bool] | None = None) -> None:
        """Run the check with ``send(*command)``, which sends one command and returns its
        reply (on a raw connection, or through a client routing by key), and ``holds_data()``,
        whether the database holds data under ``PREFIX`` (default: ``SCAN`` with ``send``, one
        node's keys). ``HandshakeFailed`` carrying ``InstanceNotFound`` when refused; a
        database that refuses the write of the marker (full, read-only) raises its redis-py
        error, which ``database_errors`` makes a 503."""
        found = _text(send("GET", self.key))
        if found is None:
            held = holds_data() if holds_data is not None else self.holds_data(send)
            if held:
                self._refuse("no ownership marker, and agent-memory data of an unknown owner")
            send("SET", self.key, self.value, "NX")
            found = _text(send("GET", self.key))
        if found != self.value:
            shown = "/".join(str(found).removesuffix("/released").split("/")[:2])
            self._refuse(f"an ownership marker of another registration ({shown})")

    def holds_data(self, send: Callable[..., Any]) -> bool:
        """Whether the database (one node) holds a key under ``PREFIX`` other than ``others``
        (``SCAN`` until the first such key)."""
        cursor: Any = "0"
        while True:
            cursor, keys = send("SCAN", cursor, "MATCH", PREFIX + "*", "COUNT", 1000)
            if any(_text(key) not in self.others for key in keys):
                return True
            if _text(cursor) == "0":
                return False

    def _refuse(self, why: str) -> None:
        logger.warning(
            "instance refused: its database holds %s; every request to it is answered as for "
            "a stranger's instance until an administrator re-registers or removes it",
            why,
            extra={"instance_id": self.instance_id},
        )
        refused = InstanceNotFound(self.instance_id)
        raise HandshakeFailed(refused.message, error=refused)


def _text(value: Any) -> str | None:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class UsableConnection(AbstractConnection):
    """What every single-node client's connections add to redis-py's (a mixin of
    ``redis.Connection``, ``redis.SSLConnection`` and ``redis.UnixDomainSocketConnection``:
    :func:`connection_class`).

    Setting up a connection: redis-py's own handshake (``HELLO 3``, with ``AUTH`` when the URL
    has credentials; client name and library info) without its health-check ``PING`` (the
    socket is new), then ``SELECT`` of the URL's database number on its own, so that a failure
    says which step failed. ``HandshakeFailed`` when the server answered but refused a step or
    answered something else than the Redis protocol; a connection that breaks or times out
    raises redis-py's ``ConnectionError`` / ``TimeoutError`` as before. What the server sends
    during the handshake is not ours to trust: besides ``ResponseError`` and
    ``InvalidResponse``, a reply of another shape than the step expects makes redis-py fail
    with ``AttributeError``, ``TypeError``, ``ValueError`` or ``LookupError`` (it reads
    ``HELLO``'s map with ``.get``: a ``+PONG`` there is an ``AttributeError``).

    The health check of an idle connection (``PING`` after 30 s, ``ClientFactory``) takes any
    answer of the server for a live connection, an error reply too: a primary that cannot
    persist answers ``PING`` with ``MISCONF`` (Redis refuses PING there like a write, so that
    monitoring notices), and reads still work on it.
    """

    db: int
    owner_guard: OwnerGuard | None = None
    """Set on the classes of ``guarded_class``: checked once the connection is set up."""

    def on_connect_check_health(self, check_health: bool = True) -> None:
        self._set_up()
        if self.owner_guard is None:
            return
        try:
            self.owner_guard.check(self._command)
        except (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError):
            raise  # the marker could not be written now: a 503, try again
        except redis.exceptions.InvalidResponse as exc:
            raise HandshakeFailed(NOT_REDIS_PROTOCOL) from exc
        except redis.ResponseError as exc:  # an ACL without GET, SCAN or SET, say
            raise HandshakeFailed(OWNERSHIP_UNREADABLE) from exc

    def _command(self, *args: Any) -> Any:
        self.send_command(*args, check_health=False)  # type: ignore[no-untyped-call]
        return self.read_response()

    def _set_up(self) -> None:
        number = self.db
        self.db = 0
        try:
            super().on_connect_check_health(check_health=False)
        except redis.AuthenticationError as exc:
            raise HandshakeFailed(CREDENTIALS_REFUSED, CredentialsRefused) from exc
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except redis.exceptions.InvalidResponse as exc:
            raise HandshakeFailed(NOT_REDIS_PROTOCOL) from exc
        except (redis.RedisError, AttributeError, TypeError, ValueError, LookupError) as exc:
            raise HandshakeFailed(HANDSHAKE_REFUSED) from exc
        finally:
            self.db = number
        if not number:
            return
        try:
            self.send_command("SELECT", number, check_health=False)  # type: ignore[no-untyped-call]
            reply = self.read_response()
        except redis.exceptions.InvalidResponse as exc:
            raise HandshakeFailed(NOT_REDIS_PROTOCOL) from exc
        except redis.ResponseError as exc:
            raise HandshakeFailed(DATABASE_NUMBER_REFUSED) from exc
        if str_if_bytes(reply) != "OK":
            raise HandshakeFailed(DATABASE_NUMBER_REFUSED)

    def _send_ping(self) -> None:
        self.send_command("PING", check_health=False)  # type: ignore[no-untyped-call]
        try:
            reply = self.read_response()
        except redis.ResponseError:
            return  # the server answered: MISCONF, say
        if str_if_bytes(reply) != "PONG":
            raise redis.ConnectionError("Bad response from PING health check")


class _Connection(UsableConnection, redis.Connection):
    pass


class _SSLConnection(UsableConnection, redis.SSLConnection):
    pass


class _UnixConnection(UsableConnection, redis.UnixDomainSocketConnection):
    pass


_USABLE: dict[type, type] = {
    redis.Connection: _Connection,
    redis.SSLConnection: _SSLConnection,
    redis.UnixDomainSocketConnection: _UnixConnection,
}


def connection_class(url: str, guard: OwnerGuard | None = None) -> type[AbstractConnection]:
    """The connection class for a single-node client of ``url``: redis-py's for the URL's
    scheme (TCP, TLS, unix socket) with :class:`UsableConnection`'s handshake and health
    check, and ``guard``'s check on every new connection. ``ValueError`` for a URL redis-py
    cannot read."""
    options: dict[str, Any] = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    chosen: type[AbstractConnection] = options.get("connection_class", redis.Connection)
    usable = _USABLE.get(chosen, chosen)
    return usable if guard is None else _guarded(usable, guard)


@lru_cache(maxsize=256)
def _guarded(usable: type[AbstractConnection], guard: OwnerGuard) -> type[AbstractConnection]:
    return type(f"Guarded{usable.__name__}", (usable,), {"owner_guard": guard})
