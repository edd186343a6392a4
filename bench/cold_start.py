"""Cold containers: the first recall in a fresh process against a warm one, with and without the
actor's kept index, alone and in a burst (issue "Cold containers and the request path").

For one actor of 10,000 and of 100,000 memories of 1,536 dimensions (``--sizes``), written
straight to Redis as ``bench.latency`` writes them, this starts the local stack with one worker
(``bench.latency.local_stack``) and measures, all in one run so that every figure has its
baseline beside it:

- warm recall over HTTP (p50 of ``--requests`` after warm-up; its first request also writes the
  actor's kept index), the core's warm recall in this process, and the exact NumPy scan
  (float32 ``matrix @ query``, top 10) over the same vectors;
- the first recall in a fresh stack process (``--cold`` samples, a new process each; the
  client's connection opened before it, as API Gateway's are: ``NO_ROUTE``) with the
  kept index, and without it (its keys removed before each sample: the container builds the
  index from every record, as before kept indexes); each stack process runs the SnapStart
  hooks after its imports, as a container restored from a SnapStart snapshot has
  (``agent_memory.edge.snapstart``), and the kept-index samples are taken again without them
  (``KIVIDB_SNAPSTART=0``: a stack deployed with ``SnapStart=None``);
- a burst: ``--burst`` fresh processes started, then their first recalls sent at the same moment
  (threads), with the kept index and without it;
- correctness: in a fresh process that loaded the kept index, the semantic top 10 of 20 queries
  against the exact scan (identical lists).

Targets (ratios in this run): first recall fresh / warm recall p50 at most 5 at 10,000 and 10
at 100,000; core warm recall at most 2x the exact scan at 10,000. The kept index is read up to
its int8 codes, and its first searches fetch only their candidates' codes (``search.snapshot``
format 4, ``memories.indexes.KeptCodes``).

    python -m bench.cold_start                       # 10,000 and 100,000 x 1,536
    python -m bench.cold_start --sizes 10000 --cold 3 --out /tmp/cold
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import numpy as np
import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.database.keys import actor_bucket
from agent_memory.memories.indexes import wait_for_exact
from agent_memory.memories.scripts import KEPT_GEN
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import Stores
from bench.latency import (
    ACTOR,
    INDEX_CACHE_MB,
    INSTANCE,
    LIMIT,
    SEED,
    Case,
    Corpus,
    Seeded,
    bodies,
    client,
    cycling,
    exact_top,
    head,
    local_stack,
    memory_client,
    prepare_sessions,
    recall_request,
    seed,
)
from bench.measure import percentile, timed, verdict
from kividb_memory import NotFoundError
from local.bootstrap import start_redis_server
from tools.progress import Progress

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {10_000: 5.0, 100_000: 10.0}
"""First recall in a fresh process / warm recall p50, at most, by actor size (1,536 dims)."""
AFTER_REQUESTS = 30
"""Recalls timed in a fresh process after its first (``first_recalls``)."""
SCAN_TARGET = 2.0
"""Core warm recall / exact NumPy scan, at most, at 10,000 x 1,536."""


@dataclass
class Outcome:
    """What one case (an actor of ``case.size`` memories) measured: latencies in ms, the kept
    index's bytes and the records' (``MEMORY USAGE``), the correctness check's counts."""

    case: Case
    warm: list[float] = field(default_factory=list)
    core: list[float] = field(default_factory=list)
    scan: list[float] = field(default_factory=list)
    cold_kept: list[float] = field(default_factory=list)
    cold_unhooked: list[float] = field(default_factory=list)
    cold_built: list[float] = field(default_factory=list)
    burst_kept: list[float] = field(default_factory=list)
    burst_built: list[float] = field(default_factory=list)
    after_kept: list[float] = field(default_factory=list)
    identical: int = 0
    checked: int = 0
    kept_bytes: int = 0
    record_bytes: int = 0


def drop_kept(binary: redis.Redis, config: StoreConfig) -> None:
    """Remove the actor's kept index, so that the next container builds from the records."""
    actor = config.keys().actor(actor_bucket(ACTOR))
    binary.delete(*actor.index_parts)
    binary.hdel(actor.meta, KEPT_GEN)


FAILED: list[tuple[str, str, int]] = []
"""First recalls that did not answer 2xx: (case, variant, status); the report lists them."""
START_TIMEOUT = 300.0
"""Seconds a stack process may take to start (a burst starts eight on a shared 2-core machine)."""


NO_ROUTE = "/no-such-route"
"""A path no route of the template has: the local gateway answers its own 404."""


def first_recalls(
    redis_url: str,
    case: Case,
    body: bytes,
    processes: int,
    after: list[float] | None = None,
    *,
    snapstart: bool = True,
    variant: str = "kept",
) -> list[float]:
    """Start ``processes`` fresh stacks (running the SnapStart hooks after their imports unless
    not ``snapstart``), then send each its first recall at the same moment; their latencies
    (ms). With ``after``, the first process then gets a second recall and, a second later (its
    index has read its exact vectors by then), ``AFTER_REQUESTS`` more, whose latencies go
    there."""
    with ExitStack() as stacks:
        urls = [
            stacks.enter_context(
                local_stack(redis_url, snapstart=snapstart, timeout=START_TIMEOUT)
            )[0]
            for _ in range(processes)
        ]
        https = [stacks.enter_context(client(url)) for url in urls]
        for http in https:
            # The client's connection, opened before the clock starts by a path no route has
            # (the gateway's own 404: no function runs). In AWS a new container is invoked by
            # API Gateway over its own connections, and the caller's is not a new one.
            http.get(NO_ROUTE)
        gate = threading.Barrier(processes)
        took = [0.0] * processes

        def one(n: int) -> None:
            gate.wait()
            started = time.perf_counter()
            answer = https[n].post(case.op_path("recall"), content=body)
            took[n] = (time.perf_counter() - started) * 1000
            if not answer.is_success:  # counted and reported, not a crash of the whole run
                FAILED.append((case.label, variant, answer.status_code))

        threads = [threading.Thread(target=one, args=(n,)) for n in range(processes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if after is not None:  # the second recall starts reading the exact vectors
            https[0].post(case.op_path("recall"), content=body).raise_for_status()
            time.sleep(1.0)
            send = lambda: https[0].post(case.op_path("recall"), content=body)  # noqa: E731
            after += timed(send, AFTER_REQUESTS)
        return took


def warm_up(http: httpx.Client, path: str, body: bytes, tries: int = 5) -> None:
    """POST ``body`` to ``path`` until it answers 2xx, ``tries`` times at most: on a loaded
    machine the request that builds a large actor's index and keeps it (a write of 170 MB at
    100,000 x 1,536) can outlast the database client's 2 s socket timeout and answer 503; the
    index is cached by then, and a later read keeps it."""
    for attempt in range(tries):
        answer = http.post(path, content=body)
        if answer.is_success or attempt == tries - 1:
            answer.raise_for_status()
            return
        time.sleep(1.0)


def run_case(size: int, redis_url: str, args: argparse.Namespace) -> Outcome:
    """Seed one actor of ``size`` memories of 1,536 dimensions in the database at
    ``redis_url``, then take every measure of the module docstring for it."""
    case = Case(size, 1536)
    outcome = Outcome(case)
    corpus = Corpus(case.dims, SEED)
    queries = corpus.queries(np.random.default_rng([SEED, 1, size, case.dims]), 50)
    recall_bodies = bodies("recall", queries)
    text_client = redis.Redis.from_url(redis_url, decode_responses=True)
    binary = redis.Redis.from_url(redis_url)
    with local_stack(redis_url) as (url, _), client(url) as http, memory_client(url) as memory:
        with contextlib.suppress(NotFoundError):
            memory.delete_store(INSTANCE, case.store)
        memory.put_store(
            INSTANCE, case.store, dimensions=case.dims, dedupe_threshold=1.0, redact_pii=False
        )
        store = memory.store(INSTANCE, case.store)
        config = Stores(
            text_client, INSTANCE, FernetCipher(Fernet.generate_key()), SystemClock()
        ).get(case.store)
        with Progress("bench cold start").stage(f"{case.label}: seed", size, "memory") as bar:
            seeded = seed(binary, config, corpus, size, bar)
        prepare_sessions(store, corpus)
        for body in recall_bodies[:3]:  # the first builds the index and keeps it
            warm_up(http, case.op_path("recall"), body)
        send = cycling(recall_bodies, lambda b: http.post(case.op_path("recall"), content=b))
        outcome.warm = timed(send, args.requests)
    actor = config.keys().actor(actor_bucket(ACTOR))
    outcome.kept_bytes = sum(int(binary.strlen(key)) for key in actor.index_parts)
    outcome.record_bytes = int(binary.memory_usage(actor.memories) or 0)
    vectors = [q.vector for q in queries]
    outcome.scan = timed(cycling(vectors, lambda v: exact_top(seeded.matrix, v)), args.requests)
    memories = Memories(
        StoreDatabase(text_client, binary, config, SystemClock()),
        NoEmbedder(case.dims),
        IndexCache(INDEX_CACHE_MB * 2**20),
        "bench",
    )
    recalls = [(q.text, recall_request(q.values)) for q in queries]
    relevant = cycling(recalls, lambda r: memories.relevant(ACTOR, *r))
    relevant()  # loads the kept index
    relevant()  # reads its exact vectors in the background
    wait_for_exact()
    outcome.core = timed(relevant, args.requests)
    samples = args.cold if size < 100_000 else args.large_cold
    cold = Progress("bench cold start").stage(f"{case.label}: cold", samples * 3 + 2, "process")
    with cold as bar:
        for n in range(samples):
            body = recall_bodies[n % len(recall_bodies)]
            outcome.cold_kept += first_recalls(redis_url, case, body, 1, outcome.after_kept)
            bar.advance()
            outcome.cold_unhooked += first_recalls(
                redis_url, case, body, 1, snapstart=False, variant="kept, no hooks"
            )
            bar.advance()
            drop_kept(binary, config)
            outcome.cold_built += first_recalls(redis_url, case, body, 1, variant="built")
            bar.advance()
        outcome.burst_kept = first_recalls(
            redis_url, case, recall_bodies[0], args.burst, variant="burst, kept"
        )
        bar.advance()
        drop_kept(binary, config)
        outcome.burst_built = first_recalls(
            redis_url, case, recall_bodies[0], args.burst, variant="burst, built"
        )
        bar.advance()
    check(redis_url, case, corpus, seeded, outcome)
    return outcome


def check(redis_url: str, case: Case, corpus: Corpus, seeded: Seeded, outcome: Outcome) -> None:
    """Semantic top 10 in a fresh process that loads the kept index, against the exact scan."""
    checks = corpus.queries(np.random.default_rng([SEED, 3, case.size]), 20)
    with local_stack(redis_url) as (url, _), memory_client(url) as memory:
        store = memory.store(INSTANCE, case.store)
        for q in checks:
            answer = store.search(
                q.text, mode="semantic", actor_id=ACTOR, limit=LIMIT, query_vector=q.values
            )
            want = [seeded.ids[i] for i in exact_top(seeded.matrix, q.vector)]
            outcome.identical += [m.id for m in answer.memories] == want
            outcome.checked += 1


# --- report ------------------------------------------------------------------------------------


def p50(values: list[float]) -> float:
    """The median of ``values`` (NaN for none)."""
    return statistics.median(values) if values else float("nan")


def report(outcomes: list[Outcome], args: argparse.Namespace, commit: str, elapsed: float) -> str:
    """``cold_start.md``: the targets with their ratios and verdicts, before and after, details;
    ``elapsed`` in seconds."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Cold containers: first recall in a fresh process",
        "",
        f"Measured {when} at `{commit}` by `python -m bench.cold_start "
        f"{' '.join(sys.argv[1:])}` on this project's machine (2 cores, shared; load average "
        f"{args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end), {elapsed / 60:.1f} "
        "min. Local stack with one worker per process, `OPENBLAS_NUM_THREADS=1`, real "
        "redis-server on loopback, vectors supplied (no provider time). A fresh process has run "
        "its functions' imports before its first request (as a Lambda container's INIT does), "
        "then the SnapStart hooks (`agent_memory.edge.snapstart`: what a container restored "
        "from a SnapStart snapshot has done before its first request), so the first request "
        "pays what a new container pays per actor: loading the actor's index (read up to its "
        "int8 codes; the first searches fetch their candidates' codes only). Each process's "
        "client connection is opened before its first recall (a request of a path no route "
        "has: no function runs), as in AWS, where API Gateway invokes a new container over its "
        "own connections. "
        '"kept": the actor\'s kept index is in the database (written by the first '
        'container that read the actor); "built": it was removed first, so the container '
        "builds the index from every record (what every new container did before kept "
        "indexes). Burst: the processes are started, then their first recalls are sent at the "
        "same moment. Before this change (kept index read whole, no hooks), "
        "`bench/results/cold_start.md` at 4db10c8 had 17.3x at 10,000 and 16.1x at 100,000 on a "
        "quiet machine.",
        "",
        "## Targets (ratios in this run)",
        "",
        "| memories x dims | measure | value | baseline (same run) | ratio | target | |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        warm = percentile(o.warm, 50)
        limit = TARGETS.get(o.case.size)
        cold = p50(o.cold_kept)
        if limit is not None:
            lines.append(
                f"| {o.case.label} | first recall, fresh process (kept index), median | "
                f"{cold:.1f} ms | warm recall p50 {warm:.2f} ms | {cold / warm:.1f}x | "
                f"≤ {limit:g}x | {verdict(cold / warm <= limit)} |"
            )
        unhooked = p50(o.cold_unhooked)
        lines.append(
            f"| {o.case.label} | the same without the SnapStart hooks (`KIVIDB_SNAPSTART=0`), "
            f"median | {unhooked:.1f} ms | warm recall p50 {warm:.2f} ms | "
            f"{unhooked / warm:.1f}x | | |"
        )
        after = p50(o.after_kept)
        lines.append(
            f"| {o.case.label} | recall p50 in a process that loaded the kept index, a second "
            f"after its first | {after:.2f} ms | warm recall p50 {warm:.2f} ms | "
            f"{after / warm:.2f}x | | |"
        )
        burst = p50(o.burst_kept)
        lines.append(
            f"| {o.case.label} | burst of {len(o.burst_kept)}: first recall, median (max "
            f"{max(o.burst_kept):.0f} ms) | {burst:.1f} ms | warm recall p50 {warm:.2f} ms | "
            f"{burst / warm:.1f}x | | |"
        )
        lines.append(
            f"| {o.case.label} | burst of {len(o.burst_kept)}: median first recall / median "
            f"first recall alone | {burst:.1f} ms | first recall alone {cold:.1f} ms | "
            f"{burst / cold:.1f}x | | |"
        )
        if o.case.size == 10_000:
            core, scan = percentile(o.core, 50), percentile(o.scan, 50)
            lines.append(
                f"| {o.case.label} | core warm recall p50, in-process | {core:.2f} ms | exact "
                f"NumPy scan p50 {scan:.2f} ms | {core / scan:.2f}x | ≤ {SCAN_TARGET:g}x | "
                f"{verdict(core / scan <= SCAN_TARGET)} |"
            )
    lines += [
        "",
        "## Before and after (kept index against a build from the records, same run)",
        "",
        "| memories x dims | first recall, fresh process: built | kept | built / kept | burst "
        "median: built | kept | burst max: built | kept | warm recall p50 over HTTP |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        built, kept = p50(o.cold_built), p50(o.cold_kept)
        lines.append(
            f"| {o.case.label} | {built:.0f} ms ({built / percentile(o.warm, 50):.0f}x warm) | "
            f"{kept:.0f} ms | {built / kept:.1f}x | {p50(o.burst_built):.0f} ms | "
            f"{p50(o.burst_kept):.0f} ms | {max(o.burst_built):.0f} ms | "
            f"{max(o.burst_kept):.0f} ms | {percentile(o.warm, 50):.2f} ms |"
        )
    lines += ["", "![first recall](cold_start.png)", "", "## Details", ""]
    failed = ", ".join(f"{label} ({kind}): {status}" for label, kind, status in FAILED)
    lines.append(
        f"- First recalls that did not answer 2xx (their time is counted): {failed or 'none'}."
    )
    for o in outcomes:
        per_memory = o.kept_bytes / o.case.size
        lines += [
            f"- {o.case.label}: cold samples {len(o.cold_kept)} kept, {len(o.cold_built)} "
            f"built: kept {', '.join(f'{v:.0f}' for v in o.cold_kept)} ms (without the "
            f"hooks: {', '.join(f'{v:.0f}' for v in o.cold_unhooked)} ms); built "
            f"{', '.join(f'{v:.0f}' for v in o.cold_built)} ms. Burst of {len(o.burst_kept)} "
            f"kept: {', '.join(f'{v:.0f}' for v in sorted(o.burst_kept))} ms; built: "
            f"{', '.join(f'{v:.0f}' for v in sorted(o.burst_built))} ms.",
            f"- {o.case.label}: the kept index takes {o.kept_bytes / 2**20:.1f} MiB "
            f"({per_memory:.0f} bytes per memory) beside the records' "
            f"{o.record_bytes / 2**20:.1f} MiB (`MEMORY USAGE` of the actor's memories hash, "
            f"{o.record_bytes / o.case.size:.0f} bytes per memory): "
            f"+{100 * o.kept_bytes / max(1, o.record_bytes):.0f}%.",
            f"- {o.case.label}: semantic top 10 in a fresh process that loaded the kept index, "
            f"against the exact scan: **{o.identical}/{o.checked}** identical lists.",
        ]
    return "\n".join(lines) + "\n"


def plot(outcomes: list[Outcome], path: Path) -> None:
    """``cold_start.png``: warm, first and burst recalls per case, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    labels = [o.case.label for o in outcomes]
    series = [
        ("warm recall p50", [percentile(o.warm, 50) for o in outcomes]),
        ("first recall, kept index", [p50(o.cold_kept) for o in outcomes]),
        ("the same, no SnapStart hooks", [p50(o.cold_unhooked) for o in outcomes]),
        ("first recall, built from records", [p50(o.cold_built) for o in outcomes]),
        ("burst median, kept", [p50(o.burst_kept) for o in outcomes]),
        ("burst median, built", [p50(o.burst_built) for o in outcomes]),
    ]
    width = 0.8 / len(series)
    for n, (name, values) in enumerate(series):
        axis.bar([i + n * width for i in range(len(labels))], values, width, label=name)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels)
    axis.set_yscale("log")
    axis.set_ylabel("ms (log)")
    axis.set_title("First recall in a fresh process, with and without the kept index")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    """Run every case on a redis-server of its own and write the report and plot; 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[10_000, 100_000],
        help="memories of the actor (1,536 dims)",
    )
    parser.add_argument("--requests", type=int, default=100, help="warm requests per measure")
    parser.add_argument("--cold", type=int, default=5, help="fresh processes per cold measure")
    parser.add_argument("--large-cold", type=int, default=3, help="the same at 100,000+")
    parser.add_argument("--burst", type=int, default=8, help="processes started at once")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where cold_start.md/.png go")
    args = parser.parse_args(argv)
    commit = head()
    started = time.monotonic()
    args.load = [os.getloadavg()[0]]
    outcomes = []
    with TemporaryDirectory() as data:
        database = start_redis_server(Path(data), persist=False)
        try:
            for size in args.sizes:
                outcomes.append(run_case(size, database.url, args))
                save(outcomes, args, commit, time.monotonic() - started)  # each case as done
        finally:
            database.stop()
    print(save(outcomes, args, commit, time.monotonic() - started))
    return 0


def save(outcomes: list[Outcome], args: argparse.Namespace, commit: str, elapsed: float) -> str:
    """Write ``cold_start.md`` and ``cold_start.png`` for ``outcomes`` (the load average now as
    the end's); the report's text."""
    args.load[1:] = [os.getloadavg()[0]]
    text = report(outcomes, args, commit, elapsed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_start.md").write_text(text, encoding="utf-8")
    plot(outcomes, args.out / "cold_start.png")
    return text


if __name__ == "__main__":
    sys.exit(main())
