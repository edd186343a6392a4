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

from agent_memory.errors import DatabaseUnavailable

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
        raise DatabaseUnavailable(
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


_SCRIPTS: weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]] = weakref.WeakKeyDictionary()


def load_script(client: redis.Redis, source: str) -> Script:
    """A Lua script for ``client``, loaded on the server the first time this client uses it.

    Loading up front (one SCRIPT LOAD per client and script, not per call) spares the first call
    a NOSCRIPT round trip; it also matters for the embedded server, which closes the connection
    after any error reply, NOSCRIPT included. If the server later forgets the script (a restart),
    redis-py reloads it on NOSCRIPT as usual.
    """
    scripts = _SCRIPTS.setdefault(client, {})
    script = scripts.get(source)
    if script is None:
        script = client.register_script(source)
        with database_errors():
            client.script_load(source)
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
