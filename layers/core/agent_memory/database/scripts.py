"""Lua scripts on Redis-protocol databases: their first-line flags, loading them once per client,
and running them in pipelines (``client`` holds the clients and the error mapping).

A script may begin with ``READ_ONLY``, ``WRITES`` or ``FINISHES_WRITE`` (Redis 7 script flags);
on a server that does not read them (Redis 6, the local stack's embedded server) the line is
left out (``load_script``). ``script_then`` and ``scripts_in_pipeline`` send scripts with other
commands in one round trip, and load a script again when the server answers NOSCRIPT. Why
scripts are never sent twice on a cluster: see "Cluster mode" in docs/design.md.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError
from redis.typing import EncodableT

from agent_memory.database.client import database_errors, is_cluster
from agent_memory.database.keys import PROBE_KEY

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
    if is_cluster(client):
        # One node answers for the cluster (its nodes run one version). The probe names a key,
        # which routes it; ElastiCache Serverless refuses scripts without keys.
        try:
            with database_errors():
                client.eval(_PROBE, 1, PROBE_KEY)
            known = True
        except redis.ResponseError:
            known = False
        _FLAGS[client] = known
        return known
    pool = client.connection_pool
    with database_errors():
        connection = pool.get_connection()
        try:
            connection.send_command("EVAL", _PROBE, 1, PROBE_KEY)  # type: ignore[no-untyped-call]
            connection.read_response()
            known = True
        except redis.ResponseError:
            connection.disconnect()  # type: ignore[no-untyped-call]
            known = False
        finally:
            pool.release(connection)
    _FLAGS[client] = known
    return known


class _LoadedAtFirstUse(Script):
    """redis-py's ``Script``, loaded on the server (one SCRIPT LOAD) just before its first use
    through this object (``ensure_loaded``)."""

    loaded = False

    def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Any = None,
        client: Any = None,
    ) -> Any:
        ensure_loaded(self)
        return super().__call__(keys, args, client)


def ensure_loaded(script: Script) -> None:
    """Load ``script`` on its client's server unless this process did already (a script of
    ``load_script``); a pipeline that sends it by its SHA calls this first. Errors: as
    ``database_errors()`` maps them."""
    if isinstance(script, _LoadedAtFirstUse) and not script.loaded:
        with database_errors():
            script.registered_client.script_load(script.script)
        script.loaded = True


def load_script(client: redis.Redis, source: str) -> Script:
    """A Lua script for ``client``, loaded on the server the first time this client uses it.

    Loading before the first call (one SCRIPT LOAD per client and script, not per call) spares
    that call a NOSCRIPT round trip; it also matters for the embedded server, which closes the
    connection after any error reply, NOSCRIPT included. If the server later forgets the script
    (a restart), redis-py reloads it on NOSCRIPT as usual. The load waits for the first call,
    not for the service that holds the script to be made: a service holds every script it may
    run (sessions hold eight), and a new container's first recall loaded nineteen scripts, one
    round trip each, to run four.

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
        script = _LoadedAtFirstUse(client, body)
        scripts[source] = script
    return script


def scripts_in_pipeline(
    client: redis.Redis,
    script: Script,
    calls: Sequence[tuple[Sequence[str], Sequence[EncodableT]]],
) -> list[Any]:
    """Run ``script`` once for each ``(keys, args)`` of ``calls``; returns the replies in order.
    On a single node they go in one non-transactional pipeline (one round trip; a NOSCRIPT
    reply, the server having forgotten the script, loads it and sends them all again, so
    only for scripts that may run twice with the same effect: read-only ones, or writes that
    set or remove entries). On a cluster one after the other, one round trip each: redis-py's
    cluster pipeline refuses scripts. Errors: ``redis`` exceptions, as the caller's
    ``database_errors()`` maps them."""
    if is_cluster(client):
        return [script(keys=list(keys), args=list(args), client=client) for keys, args in calls]
    if not calls:
        return []

    def queue(pipe: Pipeline, first: bool) -> int:
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return 0

    return _with_script_loaded(client, script, queue)


def _with_script_loaded(
    client: redis.Redis, script: Script, queue: Callable[[Pipeline, bool], int]
) -> list[Any]:
    """Send what ``queue(pipe, first_attempt)`` queues in one non-transactional pipeline and
    return the replies after the first ``n`` (``queue`` returns ``n``: replies of commands
    that are not the caller's concern); a NOSCRIPT reply loads ``script`` and sends again,
    once. Any other error reply is raised."""
    ensure_loaded(script)
    for attempt in range(2):
        pipe = client.pipeline(transaction=False)
        skip = queue(pipe, attempt == 0)
        replies: list[Any] = pipe.execute(raise_on_error=False)[skip:]
        if attempt == 0 and any(isinstance(r, NoScriptError) for r in replies):
            client.script_load(script.script)
            continue
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies
    raise AssertionError("unreachable")  # pragma: no cover


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

    On a cluster the keys of ``before``, of the script and of ``reads`` may live on different
    primaries, and redis-py's cluster pipeline sends again, one by one, every command of a node
    whose connection failed or timed out, which could run a write script twice. So there the
    three parts go one after the other: ``before`` (writes that may be sent twice: they set
    entries to values), the script alone (a failure is a failure, never sent again; NOSCRIPT
    is handled by redis-py's ``Script``), then ``reads``: three round trips instead of one.
    """
    if is_cluster(client):
        if before is not None:
            first = client.pipeline(transaction=False)
            before(first)
            first.execute()
        reply = script(keys=list(keys), args=list(args), client=client)
        after = client.pipeline(transaction=False)
        reads(after)
        return [reply, *after.execute()]

    def queue(pipe: Pipeline, first: bool) -> int:
        if before is not None and first:  # sent again they would not be: they ran
            before(pipe)  # (NOSCRIPT is the script's own reply)
        skip = len(pipe.command_stack)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        reads(pipe)
        return skip

    return _with_script_loaded(client, script, queue)
