"""Access to Redis-protocol databases: one client per URL per container, errors made domain.

Clients are created lazily and cached (never at import time). redis-py clients are thread-safe
and pool connections, which the local stack relies on when several "containers" share a process.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError
from redis.retry import Retry
from redis.typing import EncodableT

from agent_memory.errors import DatabaseUnavailable, WritesRefused

SOCKET_TIMEOUT_SECONDS = 2.0
_TRANSIENT_CODES = frozenset({"BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "LOADING"})


@lru_cache(maxsize=64)
def redis_client(url: str, *, binary: bool = False) -> redis.Redis:
    """A cached client for ``url`` (``redis://`` or ``rediss://``), answering ``str`` values,
    or ``bytes`` with ``binary`` (for vectors, which are raw float32 bytes).

    Commands are never retried by the client: a timeout can strike after the server ran a
    write (a Lua append or add), and sending it again would apply it twice. A failure surfaces
    at once as ``DatabaseUnavailable`` (503 with Retry-After, see :func:`database_errors`), and
    the caller decides. Idle pooled connections are checked (PING) after 30 s, which catches
    most connections a frozen Lambda left behind before a command is sent on them.
    """
    return redis.Redis.from_url(
        url,
        decode_responses=not binary,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=30,
        retry=Retry(NoBackoff(), retries=0),
    )


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn redis-py connection failures, timeouts, READONLY and OOM answers into
    ``DatabaseUnavailable`` (HTTP 503 with Retry-After upstream)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise DatabaseUnavailable(
            "The database cannot be reached right now; retry in a moment."
        ) from exc
    except (redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError) as exc:
        # A replica promoted mid-failover answers READONLY; a full database under noeviction
        # answers OOM. Both pass; the client should retry rather than see a 500.
        raise WritesRefused(
            "The database is not accepting writes right now; retry in a moment."
        ) from exc
    except redis.ResponseError as exc:
        # Transient states that redis-py has no class for; the reply's first word is the
        # server's error code (https://redis.io/docs/latest/develop/reference/protocol-spec/).
        if str(exc).split(" ", 1)[0] in _TRANSIENT_CODES:
            raise DatabaseUnavailable(
                "The database is busy or failing over; retry in a moment."
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


READ_ONLY = "#!lua flags=no-writes\n"
"""First line of a script that only reads: Redis 7 runs it when the database is full
(``maxmemory`` under ``noeviction``) and on read-only replicas, where it refuses any script not
so declared (script flags:
https://redis.io/docs/latest/develop/interact/programmability/eval-intro/#eval-flags)."""
WRITES = "#!lua\n"
"""First line of a script that may write: Redis 7 refuses it whole, before it runs, when the
database is full (OOM) or read-only, so it never stops half-way for lack of memory. (A script
without this line is only refused at its first command that may grow memory; one that deleted
something first would then run to its end.)"""
FINISHES_WRITE = "#!lua flags=allow-oom\n"
"""First line of a script that completes a write already made (the index step after an
append), or takes one back: it runs even when that write filled the database, so the two steps
never disagree. It must write little: the index entries of that write, or removals."""
_PROBE = READ_ONLY + "return 1"

_SCRIPTS: weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]] = weakref.WeakKeyDictionary()
_FLAGS: weakref.WeakKeyDictionary[redis.Redis, bool] = weakref.WeakKeyDictionary()


def _understands_flags(client: redis.Redis) -> bool:
    """Whether the server reads a script's ``#!lua`` first line (Redis 7 and later); the
    embedded fakeredis server and Redis 6 take it for Lua and fail. Asked once per client, on a
    connection of its own that is dropped after an error reply (the embedded server closes a
    connection after one)."""
    known = _FLAGS.get(client)
    if known is not None:
        return known
    pool = client.connection_pool
    with database_errors():
        connection = pool.get_connection()
        try:
            connection.send_command("EVAL", _PROBE, 0)  # type: ignore[no-untyped-call]
            connection.read_response()
            known = True
        except redis.ResponseError:
            connection.disconnect()  # type: ignore[no-untyped-call]
            known = False
        finally:
            pool.release(connection)
    _FLAGS[client] = known
    return known


def load_script(client: redis.Redis, source: str) -> Script:
    """A Lua script for ``client``, loaded on the server the first time this client uses it.

    Loading up front (one SCRIPT LOAD per client and script, not per call) spares the first call
    a NOSCRIPT round trip; it also matters for the embedded server, which closes the connection
    after any error reply, NOSCRIPT included. If the server later forgets the script (a restart),
    redis-py reloads it on NOSCRIPT as usual.

    A script may begin with ``READ_ONLY``, ``WRITES`` or ``FINISHES_WRITE``; on a server that
    does not know these flags (``_understands_flags``) the line is left out, and the script runs
    the same, without the OOM and read-only guarantees they give.
    """
    scripts = _SCRIPTS.setdefault(client, {})
    script = scripts.get(source)
    if script is None:
        body = source
        if source.startswith("#!") and not _understands_flags(client):
            body = source.split("\n", 1)[1]
        script = client.register_script(body)
        with database_errors():
            client.script_load(body)
        scripts[source] = script
    return script


def script_then(
    client: redis.Redis,
    script: Script,
    keys: Sequence[str],
    args: Sequence[EncodableT],
    reads: Callable[[Pipeline], object],
    *,
    before: Callable[[Pipeline], object] | None = None,
) -> list[Any]:
    """Run ``script`` and then the read commands that ``reads`` queues, in one round trip (a
    non-transactional pipeline); returns the replies, the script's first. ``before`` queues
    writes that must run just before the script in the same round trip (their replies are
    dropped; on a NOSCRIPT retry they are not sent again, having run).

    redis-py's own pipelined scripts ask SCRIPT EXISTS first, a round trip more. Here a NOSCRIPT
    reply (the server restarted and forgot the script) loads it and sends everything again;
    that is safe because NOSCRIPT means the script did not run, and ``reads`` must only read.
    Errors: ``redis`` exceptions, as the caller's ``database_errors()`` maps them.
    """
    for attempt in range(2):
        pipe = client.pipeline(transaction=False)
        if before is not None and attempt == 0:
            before(pipe)
        skip = len(pipe.command_stack)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        reads(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)[skip:]
        if isinstance(replies[0], NoScriptError) and attempt == 0:
            client.script_load(script.script)
            if before is not None:
                before = None  # they ran (NOSCRIPT is the script's own reply)
            continue
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies
    raise AssertionError("unreachable")  # pragma: no cover
