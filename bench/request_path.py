"""The warm request path: its share of each request, and HTTP p50 against the core's.

    python -m bench.request_path [--requests 500] [--runs 3] [--profile ROUTE ...]
                                 [--rounds 5] [--http-requests 200] [--out DIR]

Two measurements, each against a baseline taken in the same run:

1. In one process: starts a ``redis-server`` of its own (no persistence) in a temporary
   folder, sets up organization ``local`` and a store as ``make run`` does, and serves each
   request through the local gateway's ``invoke`` (``local.server.Gateway``: API Gateway's
   routing, the authorizer and the function, as ``make run`` serves them, without the HTTP
   server). Routes: add events (2 messages), recall (an actor with a profile, 20 memories, a
   session of 40 messages), keyword search, semantic search, get session. Per route: the p50
   (median over runs of each run's p50), its ratio to a bare ``RPUSH`` p50 measured in the
   same run, database round trips per request (each write of a command or a pipeline to a
   connection's socket), commands per request (``INFO commandstats``, scripts' own commands
   included), and the share of the request's wall time each part of the path takes
   (``bench.request_spans``: gateway, authorizer, routing, validation, settings read, the
   route's own work, answer encoding, effects). ``--profile ROUTE`` (one or more times) adds
   cProfile's top entries for that route.
2. Over HTTP (``bench.request_http``, skipped with ``--rounds 0``): the 10,000 x 384 case of
   ``bench.latency`` on the same redis-server, HTTP p50 over the core's in-process p50 per
   operation in interleaved rounds, with the issue's targets (semantic search and recall at
   most 2x, keyword search 3x) and PASS or FAIL.

Writes ``request_path.md`` and ``request_path.png`` to ``--out`` (default ``bench/results/``).
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
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
import redis.connection

from bench.measure import percentile
from bench.request_http import OPS, TARGETS, Ratios, measure_ratios, ratio_rows
from bench.request_spans import FLOWS, OUTSIDE, PARTS, spans_of
from local.bootstrap import bootstrap, secret_key, start_redis_server
from local.server import PARAMETERS_ENV, SCHEDULER_ENV, Gateway
from local.template import read_http_api
from tools.progress import Progress, Stage

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
API_KEY = "bench-request-path-0123456789abcdef012345"
STORE = "/instances/local/agent-memory/path"
PROFILE_TOP = 15
PROFILE_DEPTH = 30
ROUTES = ("add events", "recall", "keyword search", "semantic search", "get session")

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
    """The store, actor ``ann``'s profile (2 fields), 20 memories of ``ann`` (vectors of their
    own) and a session of 40."""
    fields = [
        {"name": "city", "description": "Where the actor lives", "type": "text"},
        {"name": "likes", "description": "What the actor likes", "type": "list"},
    ]
    status, answer = await call("PUT", STORE, {"dimensions": 8, "profile_fields": fields})
    assert status in (200, 201), answer
    profile = {"fields": {"city": "Lisbon", "likes": ["tea", "trains"]}}
    status, answer = await call("PATCH", f"{STORE}/actors/ann/profile", profile)
    assert status == 200, answer
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
    vector = [1.0 if i == 3 else 0.1 for i in range(8)]
    semantic = {**search, "mode": "semantic", "query_vector": vector}
    return {
        "add events": lambda n: call("POST", f"{STORE}/sessions/w{n % 50}/events", {"events": two}),
        "recall": lambda n: call("POST", f"{STORE}/recall", recall),
        "keyword search": lambda n: call("POST", f"{STORE}/memories/search", search),
        "semantic search": lambda n: call("POST", f"{STORE}/memories/search", semantic),
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
        latencies, cpu = [], []
        with RoundTrips() as trips:
            for n in range(count):
                start, start_cpu = time.perf_counter(), time.thread_time()
                status, answer = await send(n)
                cpu.append((time.thread_time() - start_cpu) * 1000)
                latencies.append((time.perf_counter() - start) * 1000)
                assert status == 200, (route, status, answer[:300])
        after = admin.info("commandstats")
        commands = sum(v["calls"] for v in after.values()) - sum(
            v["calls"] for v in before.values()
        )
        found[route]["p50"].append(percentile(latencies, 50))
        found[route]["cpu"].append(percentile(cpu, 50))
        found[route]["trips"] = trips.count / count
        found[route]["commands"] = (commands - 1) / count  # less the INFO itself
        done.advance()


async def _parts(gw: Gateway, route: str, send: Any, count: int) -> dict[str, float]:
    """``count`` requests of ``route`` timed by part (``bench.request_spans``): each part's
    share of their wall time."""
    found = gw.api.find(*_ROUTE_OF[route])
    assert found is not None and gw.api.authorizer is not None, route
    function, authorizer = found[0].function.module(), gw.api.authorizer.module()
    with spans_of(Gateway, authorizer, function, FLOWS[route]) as spans:
        for n in range(count):
            await send(n)
    return spans.shares()


_ROUTE_OF = {
    "add events": ("POST", f"{STORE}/sessions/w0/events"),
    "recall": ("POST", f"{STORE}/recall"),
    "keyword search": ("POST", f"{STORE}/memories/search"),
    "semantic search": ("POST", f"{STORE}/memories/search"),
    "get session": ("GET", f"{STORE}/sessions/read"),
}
"""A request of each route, as the gateway finds its function."""


def _profile(stats: pstats.Stats, top: int) -> str:
    """The ``top`` entries by own time (``tottime``), then the ``PROFILE_DEPTH`` first by
    cumulative time (deep enough to reach the route's use case), of ``stats``."""
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(PROFILE_DEPTH)
    text = out.getvalue().replace(str(ROOT) + "/", "")
    return text.replace(str(Path(redis.__file__).parents[1]) + "/", "")


async def measure(
    gw: Gateway, url: str, count: int, runs: int, profiles: list[str]
) -> dict[str, Any]:
    """Per route: its ``runs`` p50s in ms (``count`` requests each, after 20 to warm up), round
    trips and commands per request, the share of each part of the path (``parts``); the
    ``RPUSH`` p50 of each run (``rpush``); with ``profiles``, a list of ``(route, cProfile
    text)``. ``AssertionError`` when a request is not a 200."""
    call = caller(gw)
    await prepare(call)
    routes = requests(call)
    admin = redis.Redis.from_url(url)
    found: dict[str, Any] = {
        route: {"p50": [], "cpu": [], "trips": 0.0, "commands": 0.0} for route in ROUTES
    }
    found["rpush"] = []
    progress = Progress("bench request path")
    for run in range(runs):
        stage = progress.stage(f"run {run + 1}/{runs}", len(ROUTES) + 1, "step")
        with stage as done:
            await _one_run(admin, routes, count, found, done)
    with progress.stage("parts of the path", len(ROUTES), "route") as done:
        for route in ROUTES:
            found[route]["parts"] = await _parts(gw, route, routes[route], count)
            done.advance()
    found["profiles"] = []
    for profile in profiles:
        send = routes[profile]
        profiler = cProfile.Profile()
        profiler.enable()
        for n in range(count):
            await send(n)
        profiler.disable()
        stats = pstats.Stats(profiler)
        found[profile]["calls"] = stats.total_calls / count  # type: ignore[attr-defined]
        found["profiles"].append((profile, _profile(stats, PROFILE_TOP)))
    return found


def report(found: dict[str, Any], count: int, runs: int, http: Ratios | None) -> str:
    """The Markdown report of ``measure``'s figures (and of the HTTP ratios when measured)."""
    rpush = statistics.median(found["rpush"])
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The warm request path: its share of a request, and HTTP against the core",
        "",
        f"Measured {when} at `{_head()}` on this project's machine (2 cores, shared with other "
        "work: compare figures within a run).",
        "",
    ]
    if http is not None:
        loads = ", ".join(f"{x:.1f}" for x in http.load)
        rounds = len(http.load)
        lines += [
            "## HTTP p50 / the core's in-process p50 (issue 36 targets)",
            "",
            f"{rounds} interleaved rounds (load average before each: {loads}); per round and "
            "operation, requests over HTTP through the local stack (one worker; the standard "
            "library's `http.client` on one kept-alive connection), and as many calls of the "
            "core in this process (`Memories.search` / `relevant`), in alternating blocks of "
            "25; a ratio is one round's HTTP p50 over the same round's core p50, the figure the "
            "median over rounds. The last column times the same requests through the kept-alive "
            "httpx client of `bench.latency`, in a third block: the difference is the client "
            "library's own work per request, the caller's and not the path's "
            "(`bench/request_http.py`).",
            "",
            *ratio_rows(http),
            "",
        ]
    lines += [
        "## The path in one process, by part",
        "",
        f"{runs} runs of {count} requests per route through the local gateway's `invoke` "
        "(routing, the authorizer, the function; no HTTP server), real redis-server on "
        "loopback; a store of 8 dimensions, actor `ann` with a profile of 2 fields, 20 "
        "memories and a session of 40 messages. p50: median over runs of each run's p50; "
        "ratio to a bare `RPUSH` p50 measured in the same runs. CPU p50: the CPU time of this "
        "process's thread per request (`time.thread_time`: the path's own work, without the "
        "waits for the database or for other processes on a loaded machine). Python calls: the "
        "function calls cProfile counted per request of the profiled routes, the same on a "
        "quiet machine and a loaded one (the figure to compare two versions by here).",
        "",
        "| route | p50 | runs (min - max) | x RPUSH | CPU p50 | Python calls / request | "
        "round trips / request | commands / request | outside the route's own work |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for route in ROUTES:
        p50s = found[route]["p50"]
        median = statistics.median(p50s)
        trips, commands = found[route]["trips"], found[route]["commands"]
        outside = sum(found[route]["parts"][part] for part in OUTSIDE)
        cpu = statistics.median(found[route]["cpu"])
        calls = found[route].get("calls")
        counted = f"{calls:,.0f}" if calls is not None else "(not profiled)"
        lines.append(
            f"| {route} | {median:.2f} ms | {min(p50s):.2f} - {max(p50s):.2f} | "
            f"{median / rpush:.1f}x | {cpu:.2f} ms | {counted} | {trips:.1f} | {commands:.1f} | "
            f"{outside:.0%} |"
        )
    lines += [
        "",
        f"Baseline: bare `RPUSH` p50 {rpush:.3f} ms.",
        "",
        f"Share of a warm request's wall time by part ({count} more requests per route, each "
        "part timed exclusive of the parts it calls; `bench/request_spans.py` says what each "
        "part holds; in AWS the gateway's part is API Gateway's):",
        "",
        "| route | " + " | ".join(PARTS) + " |",
        "|---|" + "---|" * len(PARTS),
    ]
    for route in ROUTES:
        parts = found[route]["parts"]
        lines.append(f"| {route} | " + " | ".join(f"{parts[p]:.0%}" for p in PARTS) + " |")
    lines += [
        "",
        "Command: `make bench-request-path` (`python -m bench.request_path`); "
        "`bench/results/request_path.png` plots both tables.",
    ]
    for route, text in found.get("profiles", []):
        lines += [
            "",
            f"## Profile: {route} (cProfile, {count} requests: top {PROFILE_TOP} by own time, "
            f"then top {PROFILE_DEPTH} by cumulative time)",
            "",
            "```",
            text.strip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def plot(found: dict[str, Any], http: Ratios | None, path: Path) -> None:
    """The parts of each route (stacked shares) and, when measured, HTTP / core per
    operation against its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    bottom = [0.0] * len(ROUTES)
    colours = plt.get_cmap("tab10")
    for i, part in enumerate(PARTS):
        shares = [found[route]["parts"][part] * 100 for route in ROUTES]
        left.barh(ROUTES, shares, left=bottom, color=colours(i), label=part)
        bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
    left.set_xlabel("share of a warm request's wall time (%), in one process")
    left.set_title("Where a warm request's time goes")
    left.invert_yaxis()
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4)
    if http is not None:
        ops = list(OPS)
        ratios = [http.ratio(op) for op in ops]
        right.bar(ops, ratios, color="#4c72b0")
        for x, op in enumerate(ops):
            for r in http.ratios(op):
                right.plot(x, r, "k.", alpha=0.6)
            via_httpx = http.httpx_ratio(op)
            if via_httpx is not None:
                label = "through httpx" if x == 0 else None
                right.plot(x, via_httpx, "o", mfc="none", mec="#55a868", label=label)
            if op in TARGETS:
                right.hlines(TARGETS[op], x - 0.4, x + 0.4, colors="#c44e52", linestyles="--")
        right.set_ylabel("HTTP p50 / core in-process p50 (x)")
        right.set_title("10,000 x 384: HTTP over the core (dashes: targets; dots: rounds)")
        if http.httpx:
            right.legend(fontsize=8)
        right.tick_params(axis="x", labelsize=8)
    else:
        right.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and write the report and its plot; 0."""
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
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved HTTP / core rounds (0: none)"
    )
    parser.add_argument("--http-requests", type=int, default=200, help="per operation and side")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--no-plot",
        action="store_true",
        help="write request_path.md only (the test suite's run: matplotlib is a bench requirement)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kividb-request-path-") as folder:
        database = start_redis_server(Path(folder) / "redis", persist=False)
        try:
            gw = gateway(database.url, Path(folder))
            found = asyncio.run(measure(gw, database.url, args.requests, args.runs, args.profile))
            http = None
            if args.rounds > 0:

                def progress(desc: str, total: int) -> AbstractContextManager[Stage]:
                    return Progress("bench request path").stage(desc, total, "op")

                http = measure_ratios(database.url, args.rounds, args.http_requests, progress)
        finally:
            database.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    text = report(found, args.requests, args.runs, http)
    (args.out / "request_path.md").write_text(text)
    if not args.no_plot:
        plot(found, http, args.out / "request_path.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
