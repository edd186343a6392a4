"""A bounded load test of the local stack with locust: throughput, latency per route, errors,
peak memory, and the exactly-once check afterwards (docs/reliability.md, "Load").

Starts a ``redis-server`` of its own, the scripted model provider (``tools.scripted_model``, in
a process of its own) and the local stack as ``make run`` does (``--workers`` 2,
``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``), all on loopback. Each of ``--runs`` runs uses two fresh
stores whose language and embedding models are the scripted provider
(``extraction_delay_seconds`` 30, ``summarize_after`` 1,000 so that nothing is folded away, and
``dedupe_threshold`` 1), and runs locust headless (``bench/locustfile.py``, in its own process:
gevent monkey-patches) twice:

- the baseline: 1 user for ``--baseline-seconds``, the same mix one call at a time;
- the load: ``--users`` users (all started in the first second) for ``--seconds``, each waiting
  a random 0 to ``--wait`` s between calls (default 0: back to back, so the figures are the
  stack's capacity with that many callers, not the offered load).

Each user is a ``bench.traffic.Agent``: many sessions (a new one every 15 turns) appending 2
messages and recalling, searches, memory adds and session reads, and ``POST .../extract`` of
each finished session; the scheduler loop extracts in the background meanwhile (after 30 s
of quiet, or at once when asked). Latencies are the users' own timings of each call (exact, not
locust's rounded percentiles); throughput is answered calls per second over the run. The
resident memory of the stack's process tree, of the redis-server and of the provider is sampled
with psutil every 0.2 s. After the last run, once extraction has caught up, every session and
every actor's memories are read back (``bench.traffic.check_exactly_once``). Making the stores,
waiting for extraction and the check go through the Python client (``kividb_memory``, no
retries); the users' calls are locust's own (bench/locustfile.py).

Reported: medians over the runs of calls per second and of p50 / p99 per route, each with its
ratio to the baseline of the same run; errors; peak resident memory; the check. Writes
``bench/results/load.md`` and ``.png``.

    make bench-load                                  # 3 runs: 15 s baseline, 60 s x 16 users
    python -m bench.load --runs 1 --seconds 180 --users 32 --wait 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import redis

from bench.measure import percentile
from bench.traffic import WEIGHTS, Check, Ledger, check_exactly_once, statuses
from kividb_memory import MemoryClient
from local.bootstrap import free_port, start_redis_server
from local.launch import running_stack, stop
from tools.progress import Progress

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "bench" / "results"
API_KEY = "kvm_bench_load_0123456789abcdefghijklmnopqr"
BASE = "/instances/local/agent-memory"
ROUTES = [*WEIGHTS, "POST extract"]


# ------------------------------------------------------------------------------------------
# Resident memory, sampled
# ------------------------------------------------------------------------------------------


class RssSampler:
    """Samples, every ``interval`` s on a thread of its own, the resident memory (RSS) of named
    process trees (a pid and all its descendants, found again at every sample, so workers that
    start later count); ``peaks`` holds the highest total of each name, in MB, and ``series``
    ``(monotonic time, {name: MB})`` samples."""

    def __init__(self, trees: dict[str, int], interval: float = 0.2) -> None:
        self.trees = trees
        self.interval = interval
        self.peaks: dict[str, float] = dict.fromkeys(trees, 0.0)
        self.series: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def reset(self) -> dict[str, float]:
        """Start the peaks again from 0; the peaks until now."""
        with self._lock:
            peaks, self.peaks = self.peaks, dict.fromkeys(self.trees, 0.0)
        return peaks

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> dict[str, float]:
        """One sample: MB of RSS per tree (processes that vanish meanwhile count 0)."""
        import psutil  # type: ignore[import-untyped,import-not-found,unused-ignore]

        now: dict[str, float] = {}
        for name, pid in self.trees.items():
            total = 0
            try:
                root = psutil.Process(pid)
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                processes = []
            for process in processes:
                with suppress(psutil.NoSuchProcess):
                    total += process.memory_info().rss
            now[name] = total / 2**20
        with self._lock:
            for name, mb in now.items():
                self.peaks[name] = max(self.peaks[name], mb)
        return now

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system, reaped children included) used so far by each tree's
        processes that are alive now."""
        import psutil  # type: ignore[import-untyped,import-not-found,unused-ignore]

        used: dict[str, float] = {}
        for name, pid in self.trees.items():
            total = 0.0
            try:
                root = psutil.Process(pid)
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                processes = []
            for process in processes:
                with suppress(psutil.NoSuchProcess):
                    t = process.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
            used[name] = total
        return used

    def _run(self) -> None:
        while not self._stop.is_set():
            self.series.append((time.monotonic(), self.sample()))
            self._stop.wait(self.interval)


# ------------------------------------------------------------------------------------------
# The pieces
# ------------------------------------------------------------------------------------------


@contextmanager
def scripted_provider() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m tools.scripted_model`` on a free port; yields ``(/v1 URL, process)``."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.scripted_model", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/stats", timeout=1).raise_for_status()
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the scripted provider did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1", process
    finally:
        stop(process, grace=5)


def make_store(client: MemoryClient, name: str, provider: str) -> str:
    """A new store ``name`` of instance ``local`` on the scripted ``provider``; its path."""
    client.put_store(
        "local",
        name,
        llm_provider="custom",
        llm_model="scripted",
        llm_base_url=provider,
        embed_provider="custom",
        embed_model="scripted",
        embed_base_url=provider,
        dimensions=384,
        extraction_delay_seconds=30,
        summarize_after=1000,
        dedupe_threshold=1.0,
        consolidate_after_memories=0,  # load, not consolidation, is measured here
    )
    return f"{BASE}/{name}"


@dataclass
class Phase:
    """One locust run: its ``users``, ``seconds`` asked, the ``ledger`` its users wrote,
    locust's own aggregated calls per second (a cross-check) and the CPU seconds locust
    used."""

    users: int
    seconds: float
    ledger: Ledger
    locust_rate: float | None
    locust_cpu: float

    def rate(self) -> float:
        """Answered calls per second, first call's start to last call's end."""
        answers = self.ledger.answers
        if not answers:
            return 0.0
        span = max(a.end for a in answers) - min(a.start for a in answers)
        return len(answers) / max(span, 1e-9)

    def latencies(self, route: str) -> list[float]:
        """Milliseconds of each answered call of ``route``."""
        return [a.seconds * 1000 for a in self.ledger.answers if a.route == route and a.status]

    def errors(self) -> int:
        """Calls without a 2xx answer."""
        return sum(1 for a in self.ledger.answers if not a.ok)


def run_locust(
    url: str, store: str, *, users: int, seconds: float, wait: float, tag: str, folder: Path
) -> Phase:
    """Run ``bench/locustfile.py`` headless against ``url``; its users' ledger and rate."""
    ledger_path = folder / f"{tag}-ledger.json"
    csv = folder / tag
    env = {
        **os.environ,
        "KIVIDB_LOAD_STORE": store,
        "KIVIDB_LOAD_KEY": API_KEY,
        "KIVIDB_LOAD_TAG": tag,
        "KIVIDB_LOAD_WAIT": f"{wait:g}",
        "KIVIDB_LOAD_LEDGER": str(ledger_path),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(ROOT / "bench" / "locustfile.py"),
            "--headless",
            "-u",
            str(users),
            "-r",
            str(users),
            "-t",
            f"{seconds:g}s",
            "--stop-timeout",
            "40",
            "--host",
            url,
            "--csv",
            str(csv),
            "--only-summary",
            "--loglevel",
            "WARNING",
            "--exit-code-on-error",
            "0",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ledger = Ledger.load(json.loads(ledger_path.read_text(encoding="utf-8")))
    rate = None
    stats = Path(f"{csv}_stats.csv")
    if stats.exists():
        import csv as csv_module

        for row in csv_module.DictReader(stats.open(encoding="utf-8")):
            if row.get("Name") == "Aggregated":
                rate = float(row["Requests/s"])
    return Phase(users, seconds, ledger, rate, cpu)


def wait_for_extraction(client: MemoryClient, stores: list[str], limit: float) -> float:
    """Wait until no session of ``stores`` (paths) waits for extraction (at most ``limit`` s);
    the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        waiting = 0
        for store in stores:
            counts = client.get_store("local", store.rsplit("/", 1)[1]).counts
            assert counts is not None  # get_store always has them
            waiting += counts.waiting_for_extraction
        if waiting == 0:
            break
        time.sleep(2)
    return time.monotonic() - start


@dataclass
class Run:
    """One run: its ``baseline`` and ``load`` phases, and during the load the peak RSS (MB)
    and the CPU seconds of each process tree (``stack``, ``redis``, ``provider``, and
    ``locust``)."""

    baseline: Phase
    load: Phase
    peaks: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------


def _commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "layers", "functions", "local", "template.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return head + (" (with uncommitted changes in layers/, functions/ or local/)" if dirty else "")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def route_table(runs: list[Run]) -> list[tuple[str, int, float, float, float, float, int]]:
    """Per route: calls under load (all runs), p50 and p99 under load and in the baseline
    (medians over the runs, ms), errors under load."""
    rows: list[tuple[str, int, float, float, float, float, int]] = []
    for route in ROUTES:
        load50 = [_median(r.load.latencies(route)) for r in runs if r.load.latencies(route)]
        load99 = [percentile(r.load.latencies(route), 99) for r in runs if r.load.latencies(route)]
        base50 = [_median(r.baseline.latencies(route)) for r in runs if r.baseline.latencies(route)]
        base99 = [
            percentile(r.baseline.latencies(route), 99) for r in runs if r.baseline.latencies(route)
        ]
        calls = sum(len(r.load.latencies(route)) for r in runs)
        errors = sum(
            1 for r in runs for a in r.load.ledger.answers if a.route == route and not a.ok
        )
        rows.append(
            (
                route,
                calls,
                _median(load50),
                _median(load99),
                _median(base50),
                _median(base99),
                errors,
            )
        )
    return rows


def write_results(runs: list[Run], check: Check, waited: float, args: argparse.Namespace) -> str:
    load_rate = _median([r.load.rate() for r in runs])
    base_rate = _median([r.baseline.rate() for r in runs])
    locust_rates = [r.load.locust_rate for r in runs if r.load.locust_rate is not None]
    answers = [a for r in runs for a in r.load.ledger.answers]
    kinds = statuses(answers)
    base_kinds = statuses(a for r in runs for a in r.baseline.ledger.answers)
    pace = (
        f"each waiting 0 to {args.wait:g} s between calls"
        if args.wait > 0
        else "each calling back to back"
    )
    peak = {name: max(r.peaks.get(name, 0.0) for r in runs) for name in runs[0].peaks}
    lines = [
        "# Load",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {_commit()}, on this "
        f"project's machine ({os.cpu_count()} cores, shared with locust, the provider and "
        f"Redis, and with other users' work: load average {args.load_before:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end). {args.runs} run(s); "
        f"in each, a baseline of 1 locust user for {args.baseline_seconds:g} s, then "
        f"{args.users} users for {args.seconds:g} s, {pace}; local stack with "
        f"{args.workers} worker processes (as `make run`), its own "
        "redis-server, models on `tools.scripted_model` (extraction after 30 s of quiet, "
        "or at once on `POST .../extract`). Medians over the runs; ratios to the baseline of "
        "the same run.",
        "",
        f"- **Throughput**: {load_rate:.0f} calls/s under load "
        f"(**{load_rate / base_rate:.1f}x** the 1-user baseline, {base_rate:.0f} calls/s); "
        f"locust's own count: {_median(locust_rates):.0f} calls/s.",
        f"- **Errors**: {sum(v for k, v in kinds.items() if k != '2xx')} of {len(answers):,} "
        f"calls under load ({', '.join(f'{k}: {v:,}' for k, v in sorted(kinds.items()))}); "
        f"in the baselines {sum(v for k, v in base_kinds.items() if k != '2xx')} of "
        f"{sum(base_kinds.values()):,} "
        f"({', '.join(f'{k}: {v:,}' for k, v in sorted(base_kinds.items()))}).",
        f"- **Peak resident memory** (psutil, sampled every 0.2 s, whole process trees): "
        f"local stack {peak.get('stack', 0):.0f} MB (launcher, scheduler loop and "
        f"{args.workers} workers), redis-server {peak.get('redis', 0):.0f} MB, scripted "
        f"provider {peak.get('provider', 0):.0f} MB.",
        "- **CPU** during the load (seconds per second of load, median over runs; 2 cores "
        "are 2.0): "
        + ", ".join(
            f"{name} {_median([r.cpu[name] / r.load.seconds for r in runs]):.2f}"
            for name in ("stack", "redis", "provider", "locust")
        )
        + ". The stack's CPU (workers and background extraction) per call, which the machine's "
        "other load changes little: "
        f"{_median([r.cpu['stack'] / len(r.load.ledger.answers) * 1000 for r in runs]):.1f} "
        "ms (runs: "
        + ", ".join(f"{r.cpu['stack'] / len(r.load.ledger.answers) * 1000:.1f}" for r in runs)
        + ").",
        f"- **Exactly once**, read back after the last run once extraction caught up "
        f"({waited:.0f} s): {check.messages_acknowledged:,} acknowledged messages, "
        f"{check.messages_lost} lost, {check.messages_duplicated + check.messages_unknown} "
        f"duplicated or unknown, {check.sessions_out_of_order} sessions out of order; "
        f"{check.memories_acknowledged:,} acknowledged memories, {check.memories_lost} lost, "
        f"{check.memories_duplicated} duplicated; {check.extracted:,} memories extracted in "
        f"the background, {check.extracted_duplicated} duplicated.",
        "",
        "| route | calls under load | p50 ms | p99 ms | baseline p50 ms | baseline p99 ms | "
        "p50 x baseline | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for route, calls, p50, p99, b50, b99, errors in route_table(runs):
        ratio = f"{p50 / b50:.1f}x" if b50 == b50 and b50 > 0 else "-"
        lines.append(
            f"| {route} | {calls:,} | {p50:.1f} | {p99:.1f} | {b50:.1f} | {b99:.1f} | "
            f"{ratio} | {errors} |"
        )
    lines += [
        "",
        "Per run: "
        + "; ".join(
            f"{r.load.rate():.0f} calls/s (baseline {r.baseline.rate():.0f}), stack peak "
            f"{r.peaks.get('stack', 0):.0f} MB"
            for r in runs
        )
        + ".",
        "",
        f"Command: `make bench-load` (`python -m bench.load --runs {args.runs} --seconds "
        f"{args.seconds:g} --users {args.users} --wait {args.wait:g}`).",
        "",
        "![load](load.png)",
        "",
    ]
    return "\n".join(lines)


def plot(runs: list[Run], series: list[tuple[float, dict[str, float]]], path: Path) -> None:
    """Left: p50 and p99 per route, under load and in the baseline (medians over runs).
    Right: calls per second and the stack's RSS over the last run's load phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = route_table(runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), width_ratios=[3, 2])
    ys = range(len(rows))
    left.barh(
        [y - 0.3 for y in ys], [r[4] for r in rows], 0.2, color="#999999", label="baseline p50"
    )
    left.barh(
        [y - 0.1 for y in ys], [r[5] for r in rows], 0.2, color="#cccccc", label="baseline p99"
    )
    left.barh([y + 0.1 for y in ys], [r[2] for r in rows], 0.2, color="#4c72b0", label="load p50")
    left.barh([y + 0.3 for y in ys], [r[3] for r in rows], 0.2, color="#dd8452", label="load p99")
    left.set_yticks(list(ys), [r[0] for r in rows])
    left.set_xscale("log")
    left.set_xlabel("milliseconds (log; medians over runs)")
    left.invert_yaxis()
    left.legend(fontsize=8, loc="lower right")
    last = runs[-1].load
    answers = last.ledger.answers
    if answers:
        start = min(a.start for a in answers)
        per_second = Counter(int(a.end - start) for a in answers)
        seconds = sorted(per_second)
        right.plot(seconds, [per_second[s] for s in seconds], color="#4c72b0")
        right.set_xlabel("seconds into the last run's load")
        right.set_ylabel("calls answered per second", color="#4c72b0")
        twin = right.twinx()
        end = max(a.end for a in answers)
        points = [(t - start, s["stack"]) for t, s in series if start - 1 <= t <= end + 1]
        if points:
            twin.plot(*zip(*points, strict=True), color="#c44e52")
        twin.set_ylabel("local stack RSS, MB", color="#c44e52")
    fig.suptitle("Load through the local stack")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0, help="load per run")
    parser.add_argument("--baseline-seconds", type=float, default=15.0)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--wait", type=float, default=0.0, help="max think time, s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where load.md and .png go")
    args = parser.parse_args(argv)
    args.load_before = os.getloadavg()[0]
    runs: list[Run] = []
    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = start_redis_server(folder / "redis", persist=False)
        try:
            redis_pid = int(redis.Redis.from_url(database.url).info("server")["process_id"])
            with (
                scripted_provider() as (provider, model_process),
                running_stack(
                    {
                        "REDIS_URL": database.url,
                        "KIVIDB_API_KEY": API_KEY,
                        "KIVIDB_LOCAL_DIR": str(folder / "local"),
                        "KIVIDB_WORKERS": str(args.workers),
                        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
                    },
                    log=folder / "stack.log",
                ) as (url, process),
            ):
                trees = {"stack": process.pid, "redis": redis_pid, "provider": model_process.pid}
                with (
                    RssSampler(trees) as sampler,
                    MemoryClient(url, API_KEY, timeout=60, max_retries=0) as client,
                ):
                    stores: list[str] = []
                    ledgers: list[Ledger] = []
                    for n in Progress("bench load").each("runs", range(args.runs), "run"):
                        tag = f"load{n + 1}-{time.monotonic_ns() % 10**8}"
                        store = make_store(client, f"{tag}-baseline", provider)
                        baseline = run_locust(
                            url,
                            store,
                            users=1,
                            seconds=args.baseline_seconds,
                            wait=0.0,
                            tag=f"{tag}b",
                            folder=folder,
                        )
                        stores.append(store)
                        store = make_store(client, f"{tag}-load", provider)
                        sampler.reset()
                        cpu = sampler.cpu()
                        load = run_locust(
                            url,
                            store,
                            users=args.users,
                            seconds=args.seconds,
                            wait=args.wait,
                            tag=f"{tag}l",
                            folder=folder,
                        )
                        used = {k: v - cpu[k] for k, v in sampler.cpu().items()}
                        used["locust"] = load.locust_cpu
                        stores.append(store)
                        runs.append(Run(baseline, load, sampler.reset(), used))
                        ledgers += [baseline.ledger, load.ledger]
                        peak = runs[-1].peaks["stack"]
                        print(
                            f"run {n + 1}: {load.rate():.0f} calls/s under load, "
                            f"{baseline.rate():.0f} baseline, {load.errors()} errors, "
                            f"stack peak {peak:.0f} MB",
                            flush=True,
                        )
                    waited = wait_for_extraction(client, stores, limit=180)
                    check = Check()
                    for ledger in ledgers:
                        check.add(check_exactly_once(client, ledger))
                series = sampler.series
        finally:
            database.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    text = write_results(runs, check, waited, args)
    (args.out / "load.md").write_text(text, encoding="utf-8")
    plot(runs, series, args.out / "load.png")
    print(text)
    return 0 if check.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
