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

from typing import Any

import redis
from redis.connection import AbstractConnection
from redis.utils import str_if_bytes

from agent_memory.errors import CredentialsRefused, DatabaseRefused

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
NOT_REDIS_PROTOCOL = (
    "The database does not answer in the Redis protocol (RESP); an administrator must check "
    "what listens at its address."
)


class HandshakeFailed(redis.ConnectionError):
    """Setting up a new connection failed although the server was reached
    (:class:`UsableConnection`): ``message`` (one of the module's ``*_REFUSED`` texts or
    ``NOT_REDIS_PROTOCOL``) says which step; :func:`database_errors` makes it ``domain``
    (``DatabaseRefused``, or ``CredentialsRefused`` for credentials)."""

    def __init__(self, message: str, domain: type[DatabaseRefused] = DatabaseRefused) -> None:
        super().__init__(message)
        self.message = message
        self.domain = domain


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

    def on_connect_check_health(self, check_health: bool = True) -> None:
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


def connection_class(url: str) -> type[AbstractConnection]:
    """The connection class for a single-node client of ``url``: redis-py's for the URL's
    scheme (TCP, TLS, unix socket) with :class:`UsableConnection`'s handshake and health
    check. ``ValueError`` for a URL redis-py cannot read."""
    options: dict[str, Any] = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    chosen: type[AbstractConnection] = options.get("connection_class", redis.Connection)
    return _USABLE.get(chosen, chosen)
