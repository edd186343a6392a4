"""Access to Redis-protocol databases: one client per URL per container, errors made domain.

Clients are created lazily and cached (never at import time). redis-py clients are thread-safe
and pool connections, which the local stack relies on when several "containers" share a process.

A database may be a Redis or Valkey Cluster (ElastiCache cluster mode, ElastiCache Serverless,
Redis OSS or Valkey cluster): :func:`redis_client` then answers redis-py's ``RedisCluster``,
which routes each command to the primary of its key's slot and follows ``MOVED`` / ``ASK``
redirects and ``TRYAGAIN`` answers itself (the command did not run; see "Cluster mode" in
docs/design.md). Whether a URL is a cluster is the URL's ``cluster`` option when it has one
(``?cluster=1`` / ``?cluster=0``), else asked of the server on first connect (``INFO cluster``:
``cluster_enabled:1``) and remembered for the URL in this process (:func:`cluster_mode`).
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, cast
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.driver_info import DriverInfo
from redis.exceptions import (
    ClusterError,
    RedisClusterException,
    SlotNotCoveredError,
)
from redis.retry import Retry

from agent_memory.database.connections import (
    CREDENTIALS_REFUSED,
    NOT_REDIS_PROTOCOL,
    HandshakeFailed,
    OwnerGuard,
    connection_class,
)
from agent_memory.database.keys import PREFIX
from agent_memory.errors import (
    Conflict,
    CredentialsRefused,
    DatabaseRefused,
    DatabaseUnavailable,
    ValidationFailed,
    WritesRefused,
)
from agent_memory.observability import subsegment

SOCKET_TIMEOUT_SECONDS = 2.0
DRIVER_INFO = DriverInfo(lib_version=redis.__version__)
"""What each new connection tells the server (``CLIENT SETINFO``): redis-py and its version,
taken once from the package. Without it redis-py reads its version from the installed
distribution's metadata (``importlib.metadata``) for every connection it makes: 1-7 ms each on
this project's machine, and a new container's first recall makes three."""
_TRANSIENT_CODES = frozenset({"BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "LOADING"})
_WRITES_REFUSED_CODES = frozenset({"MISCONF"})
"""Error codes redis-py has no class for that refuse a write and leave reads working:
``MISCONF``, Redis refusing every write (and every script not declared ``no-writes``) after a
failed RDB save, while ``stop-writes-on-bgsave-error`` is on (redis.conf)."""

CLUSTER_OPTION = "cluster"
"""The URL query option that says whether the database is a cluster (``1``, ``yes``, ``true``,
``on``; or ``0``, ``no``, ``false``, ``off``). It is ours: it is taken out of the URL before
redis-py reads it."""
_YES = frozenset({"1", "yes", "true", "on"})
_NO = frozenset({"0", "no", "false", "off"})

TRANSACTION_REDIRECTS = (redis.exceptions.AskError,)
"""What a cluster transaction raises when its slot is served by another node than this
process thought (``MOVED``; ``ASK`` while it moves): redis-py follows redirects of single
commands and pipelines, not of ``WATCH`` / ``MULTI``, but it has updated its slot map, and the
transaction did not run, so it may be tried again (a few times, as after ``WatchError``)."""
TRANSACTION_ATTEMPTS = 5

_MODES: dict[str, bool] = {}
_MODES_LOCK = threading.Lock()


def split_cluster_option(url: str) -> tuple[str, bool | None]:
    """``url`` without its ``cluster`` query option, and that option's value (None when the
    URL has none). Only that option is removed; the rest of the URL is kept byte for byte.
    ``ValidationFailed`` for a value that is neither yes nor no."""
    base, mark, query = url.partition("?")
    if not mark:
        return url, None
    kept, forced, seen = [], None, False
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name != CLUSTER_OPTION and name.lower() == CLUSTER_OPTION:
            raise ValidationFailed(
                f"The URL option '{name}' is spelled '{CLUSTER_OPTION}' (lower case): "
                f"{CLUSTER_OPTION}=1 or {CLUSTER_OPTION}=0."
            )
        if name != CLUSTER_OPTION:
            kept.append(part)
            continue
        if seen:
            raise ValidationFailed(
                f"The URL gives the option '{CLUSTER_OPTION}' more than once; give it once."
            )
        seen = True
        if value.lower() in _YES:
            forced = True
        elif value.lower() in _NO:
            forced = False
        else:
            raise ValidationFailed(
                f"The URL option '{CLUSTER_OPTION}' must be 1 or 0 (yes / no), not '{value}'."
            )
    return (base + "?" + "&".join(kept) if kept else base), forced


def check_url(url: str) -> None:
    """Refuse, before any connection, a database URL of which redis-py could make no client:
    a bad ``cluster`` option (:func:`split_cluster_option`), a URL it cannot read (a port out
    of range, a broken IPv6 address, an option value of the wrong kind, a scheme other than
    ``redis://``, ``rediss://`` and ``unix://``) or a query option no connection of its scheme
    takes. ``ValidationFailed`` with a one-line message naming the option or redis-py's
    reason, never the URL's credentials (neither message holds any part of the URL but an
    option's name). Without this, each was a ``TypeError`` or ``ValueError`` traceback at the
    first command."""
    plain, _ = split_cluster_option(url)
    try:
        options: dict[str, Any] = redis.connection.parse_url(plain)  # type: ignore[no-untyped-call]
        chosen = connection_class(plain)
    except ValueError as exc:
        raise ValidationFailed(f"The database URL cannot be read: {exc}") from None
    unknown = sorted(set(options) - _known_options(chosen))
    if unknown:
        raise ValidationFailed(
            f"The database URL has an option that no {urlsplit(plain).scheme}:// connection "
            f"takes: '{unknown[0]}' (redis-py's connection options, or {CLUSTER_OPTION}=1/0)."
        )


_KNOWN_OPTIONS: dict[type, frozenset[str]] = {}


def _known_options(chosen: type) -> frozenset[str]:
    """The keyword arguments a connection of class ``chosen`` (or a cluster client) takes:
    read from their signatures once per class (``inspect.signature`` costs about 0.1 ms, and
    this ran on every request before)."""
    known = _KNOWN_OPTIONS.get(chosen)
    if known is None:
        names = {"connection_class", *inspect.signature(RedisCluster.__init__).parameters}
        for cls in chosen.__mro__:
            init = cls.__dict__.get("__init__")
            if init is not None:
                names.update(inspect.signature(init).parameters)
        known = _KNOWN_OPTIONS[chosen] = frozenset(names)
    return known


def cluster_mode(url: str) -> bool:
    """Whether the database at ``url`` is a cluster: the URL's ``cluster`` option, else the
    server's ``INFO cluster`` (``cluster_enabled:1``; when INFO is refused, as an ACL may,
    ``CLUSTER INFO`` answering at all), asked once per URL and process.

    ``DatabaseUnavailable`` when the server cannot be reached (nothing is remembered then);
    ``ValidationFailed`` for a bad ``cluster`` option."""
    plain, forced = split_cluster_option(url)
    if forced is not None:
        return forced
    return server_is_cluster(plain)


def server_is_cluster(url: str) -> bool:
    """Whether the server at ``url`` (a URL without our ``cluster`` option) is a cluster node,
    as it says (``INFO cluster``, else ``CLUSTER INFO``), asked once per URL and process.
    ``DatabaseUnavailable`` when it cannot be reached."""
    plain = url
    with _MODES_LOCK:
        known = _MODES.get(plain)
    if known is not None:
        return known
    try:
        known = int(_probe(plain, lambda c: c.info("cluster")).get("cluster_enabled", 0)) == 1
    except redis.ResponseError:
        # INFO refused (an ACL): CLUSTER INFO answers on a cluster only. Each question on a
        # connection of its own: the embedded server closes a connection after an error.
        try:
            _probe(plain, lambda c: c.execute_command("CLUSTER", "INFO"))  # type: ignore[no-untyped-call]
            known = True
        except redis.ResponseError:
            known = False  # "cluster support disabled", or an unknown command
    with _MODES_LOCK:
        _MODES[plain] = known
    return known


def check_cluster_option(url: str) -> None:
    """Refuse a URL whose ``cluster`` option contradicts the server, before it is registered:
    ``?cluster=0`` on a cluster node (a standalone client of a cluster gets ``MOVED`` for most
    keys, which reads as a database that cannot be reached) or ``?cluster=1`` on a server that
    is not one (the cluster client cannot start). ``ValidationFailed`` naming the fix; nothing
    when the URL has no option, when it agrees, and when the server cannot be reached (a
    registration goes on without it, as for any unreachable database)."""
    plain, forced = split_cluster_option(url)
    if forced is None:
        return
    try:
        actual = server_is_cluster(plain)
    except DatabaseUnavailable:
        return
    if actual == forced:
        return
    if actual:
        raise ValidationFailed(
            "The database is a Redis Cluster node (INFO cluster: cluster_enabled:1), and the "
            "URL says cluster=0: remove the option (clusters are found without it) or use "
            "cluster=1."
        )
    raise ValidationFailed(
        "The URL says cluster=1, but the database is not a cluster node (cluster mode is not "
        "enabled on it): remove the option or use cluster=0."
    )


def _probe(url: str, ask: Callable[[redis.Redis], Any]) -> Any:
    """``ask`` of a client of its own, on one connection to database 0 of ``url``'s server,
    closed after; ``DatabaseUnavailable`` when it cannot be reached, a ``ResponseError``
    answer raised as it is."""
    pool = redis.ConnectionPool.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), retries=0),
        connection_class=connection_class(url),
        driver_info=DRIVER_INFO,
    )
    pool.connection_kwargs["db"] = 0  # a cluster refuses SELECT: ask on database 0
    with database_errors():
        client = redis.Redis(connection_pool=pool, single_connection_client=True)  # connects
        try:
            return ask(client)
        finally:
            client.close()


class ClientFactory:
    """``redis_client``: one cached client per URL (and ``binary``)."""

    def __call__(
        self, url: str, *, binary: bool = False, guard: OwnerGuard | None = None
    ) -> redis.Redis:
        """A cached client for ``url`` (``redis://`` or ``rediss://``, with a user and
        password for AUTH when the URL has them), answering ``str`` values, or ``bytes`` with
        ``binary`` (for vectors, which are raw float32 bytes).

        Commands are never retried by the client: a timeout can strike after the server ran a
        write (a Lua append or add), and sending it again would apply it twice. A failure
        surfaces at once as ``DatabaseUnavailable`` (503 with Retry-After, see
        :func:`database_errors`), and the caller decides. Idle pooled connections are checked
        (PING) after 30 s, which catches most connections a frozen Lambda left behind before a
        command is sent on them.

        On a cluster (:func:`cluster_mode`) the client is a ``RedisCluster``: retries 0 as
        above (a connection that fails during a failover is a 503, and the client reads the
        slot map again for the next command), redirects followed, and slots whose primary is
        down answer 503 while the others work (``require_full_coverage`` off). It serves the
        same commands, so it is typed as ``redis.Redis`` for the modules that only send
        commands; the few steps that differ on a cluster ask :func:`is_cluster`.

        Making the client does no I/O: telling a cluster needs an answer from the server, and
        a cluster client reads the slot map when it is made, so the client returned is a
        stand-in (:class:`LazyClient`) that makes the real one at its first use. That use may
        then fail with ``DatabaseUnavailable`` (and the next one tries again), or with
        ``Conflict`` for a cluster URL with a database number other than 0 (a cluster has only
        database 0). ``ValidationFailed`` here for a URL of which no client can be made
        (:func:`check_url`).

        With ``guard``, the database must pass ``guard``'s check (``connections.OwnerGuard``:
        the instance's ownership marker) on every new connection of a single node, and when a
        cluster client is made; a database that fails it answers ``InstanceNotFound``.
        """
        return self._cached(url, binary, guard)

    @staticmethod
    @lru_cache(maxsize=64)
    def _cached(url: str, binary: bool, guard: OwnerGuard | None = None) -> redis.Redis:
        # a URL of which no client can be made fails now, not at its first use; a URL that
        # passed is not checked again (the cache keeps only clients, never an error)
        check_url(url)
        return cast(redis.Redis, LazyClient(url, binary, guard))

    def cache_clear(self) -> None:
        """Forget every client (and the scripts they loaded), as a new container starts."""
        self._cached.cache_clear()

    def disconnect_all(self) -> int:
        """Close the connections of every client made so far in this process, then forget
        the clients (``cache_clear``); how many clients had connected. A closed client still
        works: it connects again at its next command (``edge.snapstart``: no connection may
        be in a SnapStart snapshot, nor outlive a restore)."""
        made = [lazy._client for lazy in list(_LAZY_CLIENTS) if lazy._client is not None]
        for client in made:
            client.close()
        self.cache_clear()
        return len(made)


_LAZY_CLIENTS: weakref.WeakSet[LazyClient] = weakref.WeakSet()
"""Every ``LazyClient`` alive in this process (``ClientFactory.disconnect_all``)."""


class LazyClient:
    """Stands in for the client of a URL until its first use, when it makes the real one (a
    ``RedisCluster`` or a ``redis.Redis``, as :func:`cluster_mode` says) and passes every
    attribute on to it. A first use that cannot reach the database raises
    ``DatabaseUnavailable`` and makes nothing; the next use tries again."""

    def __init__(self, url: str, binary: bool, guard: OwnerGuard | None = None) -> None:
        self._url = url
        self._binary = binary
        self._guard = guard
        self._client: redis.Redis | RedisCluster | None = None
        self._lock = threading.Lock()
        _LAZY_CLIENTS.add(self)

    def resolved(self) -> redis.Redis | RedisCluster:
        """The real client, made now if not yet. Errors: see ``ClientFactory.__call__``."""
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self._client is None:
                self._client = _make_client(self._url, self._binary, self._guard)
            return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolved(), name)


def _make_client(
    url: str, binary: bool, guard: OwnerGuard | None = None
) -> redis.Redis | RedisCluster:
    plain, _ = split_cluster_option(url)
    if not cluster_mode(url):
        return _standalone(plain, binary, guard)
    options: dict[str, Any] = redis.connection.parse_url(plain)  # type: ignore[no-untyped-call]
    if int(options.get("db") or 0) != 0:
        raise Conflict(
            "The instance's database is a cluster, and a cluster has only database 0: "
            "register it with a URL without a database number."
        )
    try:
        with database_errors():
            cluster = RedisCluster.from_url(
                plain,
                decode_responses=not binary,
                socket_timeout=SOCKET_TIMEOUT_SECONDS,
                socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), retries=0),
                require_full_coverage=False,
                driver_info=DRIVER_INFO,
            )
            if guard is not None:
                # One check when the client is made (its marker's key is on one shard; a
                # shard's own reconnects are not checked again: docs/design.md).
                guard.check(
                    cluster.execute_command,
                    lambda: any(
                        str(key) not in guard.others
                        for key in cluster.scan_iter(match=PREFIX + "*", count=1000)
                    ),
                )
            return cluster
    except RedisClusterException as exc:
        # "Cluster mode is not enabled on this node": a URL saying cluster=1 of a server that
        # is not a cluster. Asked of the server rather than read from redis-py's message.
        if not server_is_cluster(plain):
            raise DatabaseRefused(
                "The URL says cluster=1, but the database is not a cluster node: remove the "
                "option or use cluster=0."
            ) from exc
        raise


def _standalone(url: str, binary: bool, guard: OwnerGuard | None = None) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        decode_responses=not binary,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=30,
        retry=Retry(NoBackoff(), retries=0),
        connection_class=connection_class(url, guard),
        driver_info=DRIVER_INFO,
    )


redis_client = ClientFactory()
"""The process's database clients: ``redis_client(url)``, ``redis_client(url, binary=True)``."""


def real_client(client: redis.Redis) -> redis.Redis | RedisCluster:
    """The client itself, or the one a ``redis_client`` stand-in makes (at its first use:
    errors as ``ClientFactory.__call__``)."""
    if isinstance(client, LazyClient):
        return client.resolved()
    return client


def is_cluster(client: redis.Redis) -> bool:
    """Whether ``client`` is a cluster client (``redis_client`` of a cluster URL, or a
    ``RedisCluster``)."""
    return isinstance(real_client(client), RedisCluster)


def primaries(client: redis.Redis) -> int:
    """How many primaries serve ``client``'s database: 1 for a single node."""
    real = real_client(client)
    if isinstance(real, RedisCluster):
        return len(real.get_primaries())  # type: ignore[no-untyped-call]
    return 1


_PIPELINE_ERROR = " of pipeline caused error: "


def error_code(exc: redis.ResponseError) -> str:
    """The server's error code of an error reply: its first word (``MISCONF``, ``BUSY``...;
    https://redis.io/docs/latest/develop/reference/protocol-spec/#simple-errors). redis-py
    puts ``Command # N (<command>) of pipeline caused error: `` before the reply of a command
    in a pipeline; the reply is what follows the last such mark (the command's text, which
    may hold anything, comes before it)."""
    text = str(exc)
    if text.startswith("Command # ") and _PIPELINE_ERROR in text:
        text = text.rpartition(_PIPELINE_ERROR)[2]
    return text.split(" ", 1)[0]


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn redis-py connection failures, timeouts, a cluster's failover and resharding answers,
    READONLY, OOM and MISCONF answers into ``DatabaseUnavailable`` (HTTP 503 with Retry-After
    upstream). A server that was reached but refused to set up a connection (handshake, credentials,
    database number: ``database.connections.UsableConnection``) or answers something that is not the
    Redis protocol is ``DatabaseRefused``, a ``DatabaseUnavailable`` whose message names the reason
    (``CredentialsRefused`` for credentials). Other ``RedisClusterException`` errors (keys of
    several slots in one step, a command the client cannot route) are bugs, and pass. The block is a
    trace subsegment ``redis`` (``observability.subsegment``) when the function traces."""
    try:
        with subsegment("redis"):
            yield
    except HandshakeFailed as exc:
        raise (exc.error or exc.domain(exc.message)) from exc
    except redis.AuthenticationError as exc:
        # NOAUTH / WRONGPASS where UsableConnection does not set the connection up (a cluster)
        raise CredentialsRefused(CREDENTIALS_REFUSED) from exc
    except redis.exceptions.InvalidResponse as exc:
        # bytes that are not RESP, or a reply nested deeper than redis-py reads
        raise DatabaseRefused(NOT_REDIS_PROTOCOL) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise DatabaseUnavailable(
            "The database cannot be reached right now; retry in a moment."
        ) from exc
    except (ClusterError, SlotNotCoveredError) as exc:
        # A cluster failing over or resharding: CLUSTERDOWN / MASTERDOWN, a slot whose primary
        # is gone and not replaced yet, or redirects and TRYAGAIN answers past redis-py's limit
        # of 16 (``ClusterError("TTL exhausted.")``). None of these ran the command.
        raise DatabaseUnavailable(
            "The database is failing over or moving data between shards; retry in a moment."
        ) from exc
    except redis.exceptions.AskError as exc:
        # MOVED or ASK that was not followed: a cluster transaction (WATCH / MULTI) sent to a
        # node that no longer serves its slot (``TRANSACTION_REDIRECTS`` lets a caller try
        # again), or a plain client of a cluster (a URL with ``cluster=0``).
        raise DatabaseUnavailable(
            "The database sent this request to another shard: data moving between shards "
            "(retry in a moment), or a cluster reached through a URL that says cluster=0 "
            "(register it again without that option)."
        ) from exc
    except RedisClusterException as exc:
        # Reading the slot map again after a failed connection, when no node answers.
        if isinstance(exc.__cause__, (redis.ConnectionError, redis.TimeoutError)):
            raise DatabaseUnavailable(
                "The database cannot be reached right now; retry in a moment."
            ) from exc
        raise
    except (redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError) as exc:
        # A replica promoted mid-failover answers READONLY; a full database under noeviction
        # answers OOM. Both pass; the client should retry rather than see a 500.
        raise WritesRefused(
            "The database is not accepting writes right now; retry in a moment."
        ) from exc
    except redis.ResponseError as exc:
        # Transient states that redis-py has no class for; the reply's first word is the
        # server's error code (https://redis.io/docs/latest/develop/reference/protocol-spec/).
        code = error_code(exc)
        if code in _TRANSIENT_CODES:
            raise DatabaseUnavailable(
                "The database is busy or failing over; retry in a moment."
            ) from exc
        if code in _WRITES_REFUSED_CODES:
            raise WritesRefused(
                "The database is not accepting writes right now; retry in a moment."
            ) from exc
        raise


@contextmanager
def unless_writes_refused() -> Iterator[None]:
    """For a write that a read makes on the side (pruning expired index entries): when the
    database refuses writes (``WritesRefused``: full, or a read-only replica) the write is
    skipped and the read goes on; any other failure is ``database_errors()``'s. The write must
    be one that changes nothing when it is refused: a script declared ``WRITES`` (Redis
    refuses it whole, before it runs) or a single command."""
    try:
        with database_errors():
            yield
    except WritesRefused:
        return
