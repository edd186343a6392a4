"""The warm request path in one process: time, database round trips and commands per route.

    python -m bench.request_path [--requests 500] [--runs 3] [--profile recall ...] [--out DIR]

Starts a ``redis-server`` of its own (no persistence) in a temporary folder, sets up
organization ``local`` and a store as ``make run`` does, and serves each request through the
local gateway's ``invoke`` (``local.server.Gateway``: API Gateway's routing, the authorizer and
the function, as ``make run`` serves them, without the HTTP server), so that what is measured
is the request path itself: the authorizer, validation, the use case and its round trips.
Routes: add events (2 messages), recall (an actor with 20 memories, a session of 40
messages), keyword search, get session. Per route: the p50 (median over runs of each run's
p50), its ratio to a bare ``RPUSH`` p50 measured in the same run, database round trips per
request (each write of a command or a pipeline to a connection's socket) and commands per
request (``INFO commandstats``, scripts' own commands included). ``--profile ROUTE`` (one or
more times) adds cProfile's top entries (cumulative time) for that route. Writes
``request_path.md`` to ``--out`` (default ``bench/results/``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
import redis.connection

from bench.measure import percentile
from local.bootstrap import bootstrap, secret_key, start_redis_server
from local.server import PARAMETERS_ENV, SCHEDULER_ENV, Gateway
from local.template import read_http_api
from tools.progress import Progress, Stage

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
API_KEY = "bench-request-path-0123456789abcdef012345"
STORE = "/instances/local/agent-memory/path"
ROUTES = ("add events", "recall", "keyword search", "get session")

Call = Callable[..., Awaitable[tuple[int, bytes]]]
"""``call(method, path, body=None)``: the status and body of one request through the gateway."""


class RoundTrips:
    """Counts writes to redis-py connections' sockets: one per command or pipeline sent."""

    def __init__(self) -> None:
        self.count = 0
        self._send: Callable[..., None] = redis.connection.AbstractConnection.send_packed_command

    def __enter__(self) -> RoundTrips:
        counter, send = self, self._send

        def counting(connection: Any, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            send(connection, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        redis.connection.AbstractConnection.send_packed_command = self._send  # type: ignore[method-assign]


def gateway(url: str, folder: Path) -> Gateway:
    """The local stack's gateway on the database at ``url``, its functions initialised."""
    secret_key(folder)
    os.environ["KIVIDB_SECRET_KEY_FILE"] = str(folder / "secret.key")
    bootstrap(url, folder, API_KEY)
    parameters = {
        "ControlRedisUrl": url,
        "SubnetIds": "",
        "SecurityGroupIds": "",
        "LogRetentionDays": "30",
        "LogLevel": "WARN",
    }
    os.environ[PARAMETERS_ENV] = json.dumps(parameters)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    api = read_http_api(ROOT / "template.yaml", parameters)
    os.environ.update(api.environment)
    os.environ[SCHEDULER_ENV] = "local"
    for function in api.functions():
        function.module()
    return Gateway(api)


def caller(gw: Gateway) -> Call:
    """``call(method, path, body=None)`` through ``gw`` with the bench's key: ``(status, body)``."""
    headers = [("authorization", f"Bearer {API_KEY}"), ("content-type", "application/json")]

    async def call(method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        raw = b"" if body is None else json.dumps(body).encode()
        status, _, answer = await gw.invoke(method, path, "", headers, raw)
        return status, answer

    return call


async def prepare(call: Call) -> None:
    """The store, 20 memories of actor ``ann`` (vectors of their own) and a session of 40."""
    status, answer = await call("PUT", STORE, {"dimensions": 8})
    assert status in (200, 201), answer
    for n in range(20):
        vector = [1.0 if i == n % 8 else 0.1 for i in range(8)]
        memory = {
            "text": f"Ann fact number {n} about tea and travel",
            "actor_id": "ann",
            "vector": vector,
        }
        status, answer = await call("POST", f"{STORE}/memories", memory)
        assert status in (200, 201), answer
    for n in range(20):
        events = [
            {"role": "user", "content": f"question {n} on tea"},
            {"role": "assistant", "content": f"answer {n}"},
        ]
        turn = {"actor_id": "ann", "events": events}
        status, answer = await call("POST", f"{STORE}/sessions/read/events", turn)
        assert status == 200, answer


def requests(call: Call) -> dict[str, Callable[[int], Awaitable[tuple[int, bytes]]]]:
    """One request of each route, the ``n``-th of a run."""
    two = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}]
    recall = {"session_id": "read", "actor_id": "ann", "query": "tea travel"}
    search = {"query": "tea travel", "mode": "keyword", "actor_id": "ann"}
    return {
        "add events": lambda n: call("POST", f"{STORE}/sessions/w{n % 50}/events", {"events": two}),
        "recall": lambda n: call("POST", f"{STORE}/recall", recall),
        "keyword search": lambda n: call("POST", f"{STORE}/memories/search", search),
        "get session": lambda n: call("GET", f"{STORE}/sessions/read"),
    }


async def _one_run(
    admin: redis.Redis,
    routes: dict[str, Any],
    count: int,
    found: dict[str, Any],
    done: Stage,
) -> None:
    """One run of ``measure``: ``count`` bare ``RPUSH`` calls, then each route's ``count``
    requests after 20 to warm up; each counted on ``done``."""
    pushes = []
    for n in range(count):
        start = time.perf_counter()
        admin.rpush("bench:request-path:probe", n)
        pushes.append((time.perf_counter() - start) * 1000)
    admin.delete("bench:request-path:probe")
    found["rpush"].append(percentile(pushes, 50))
    done.advance()
    for route in ROUTES:
        send = routes[route]
        for n in range(20):  # warm: the index cache, the scripts, the connections
            await send(n)
        before = admin.info("commandstats")
        latencies = []
        with RoundTrips() as trips:
            for n in range(count):
                start = time.perf_counter()
                status, answer = await send(n)
                latencies.append((time.perf_counter() - start) * 1000)
                assert status == 200, (route, status, answer[:300])
        after = admin.info("commandstats")
        commands = sum(v["calls"] for v in after.values()) - sum(
            v["calls"] for v in before.values()
        )
        found[route]["p50"].append(percentile(latencies, 50))
        found[route]["trips"] = trips.count / count
        found[route]["commands"] = (commands - 1) / count  # less the INFO itself
        done.advance()


async def measure(
    gw: Gateway, url: str, count: int, runs: int, profiles: list[str]
) -> dict[str, Any]:
    """Per route: its ``runs`` p50s in ms (``count`` requests each, after 20 to warm up), round
    trips and commands per request; the ``RPUSH`` p50 of each run (``rpush``); with
    ``profiles``, a list of ``(route, cProfile text)``. ``AssertionError`` when a request is
    not a 200."""
    call = caller(gw)
    await prepare(call)
    routes = requests(call)
    admin = redis.Redis.from_url(url)
    found: dict[str, Any] = {route: {"p50": [], "trips": 0.0, "commands": 0.0} for route in ROUTES}
    found["rpush"] = []
    progress = Progress("bench request path")
    for run in range(runs):
        stage = progress.stage(f"run {run + 1}/{runs}", len(ROUTES) + 1, "step")
        with stage as done:
            await _one_run(admin, routes, count, found, done)
    found["profiles"] = []
    for profile in profiles:
        send = routes[profile]
        profiler = cProfile.Profile()
        profiler.enable()
        for n in range(count):
            await send(n)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        found["profiles"].append((profile, out.getvalue().replace(str(ROOT) + "/", "")))
    return found


def _calls(stats: dict[str, Any]) -> int:
    return sum(int(v["calls"]) for v in stats.values())


def report(found: dict[str, Any], count: int, runs: int) -> str:
    """The Markdown report of ``measure``'s figures: the table, the baseline, the profile."""
    rpush = statistics.median(found["rpush"])
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The warm request path in one process",
        "",
        f"Measured {when} on this project's machine (2 cores), {runs} runs of {count} requests "
        "per route through the local gateway's `invoke` (routing, authorizer, function; no HTTP "
        "server), real redis-server on loopback. p50: median over runs of each run's p50; ratio "
        "to a bare `RPUSH` p50 measured in the same runs.",
        "",
        "| route | p50 | runs (min - max) | x RPUSH | round trips / request | commands / request |",
        "|---|---|---|---|---|---|",
    ]
    for route in ROUTES:
        p50s = found[route]["p50"]
        median = statistics.median(p50s)
        trips, commands = found[route]["trips"], found[route]["commands"]
        lines.append(
            f"| {route} | {median:.2f} ms | {min(p50s):.2f} - {max(p50s):.2f} | "
            f"{median / rpush:.1f}x | {trips:.1f} | {commands:.1f} |"
        )
    lines += [
        "",
        f"Baseline: bare `RPUSH` p50 {rpush:.3f} ms.",
        "",
        "Command: `make bench-request-path` (`python -m bench.request_path`).",
    ]
    for route, text in found.get("profiles", []):
        lines += [
            "",
            f"## Profile: {route} (cProfile, cumulative time, top 25)",
            "",
            "```",
            text.strip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and write the report; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--profile",
        choices=ROUTES,
        action="append",
        default=[],
        help="a route to profile (may be given more than once)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kividb-request-path-") as folder:
        database = start_redis_server(Path(folder) / "redis", persist=False)
        try:
            gw = gateway(database.url, Path(folder))
            found = asyncio.run(measure(gw, database.url, args.requests, args.runs, args.profile))
        finally:
            database.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    text = report(found, args.requests, args.runs)
    (args.out / "request_path.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
