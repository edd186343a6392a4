"""Access to Redis-protocol databases: one client per URL per container, errors made domain.

Clients are created lazily and cached (never at import time). redis-py clients are thread-safe
and pool connections, which the local stack relies on when several "containers" share a process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from agent_memory.errors import DatabaseUnavailable

SOCKET_TIMEOUT_SECONDS = 2.0


@lru_cache(maxsize=64)
def redis_client(url: str) -> redis.Redis:
    """A cached client for ``url`` (``redis://`` or ``rediss://``), answering ``str`` values.

    Connection and timeout errors are retried twice with exponential backoff (10 ms base) before
    they surface; :func:`database_errors` turns them into ``DatabaseUnavailable``.
    """
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), retries=2),
    )


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn redis-py connection failures into ``DatabaseUnavailable`` (HTTP 503 upstream)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise DatabaseUnavailable(
            "The database cannot be reached right now; retry in a moment."
        ) from exc
