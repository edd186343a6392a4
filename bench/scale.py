"""A million memories on a three-primary Redis Cluster, through the local stack (issue 12).

Starts a Redis Cluster of three primaries on loopback (``local.bootstrap.start_redis_cluster``)
and the local stack on it (control database and instance ``local``), then:

1. **Seeds** one store with ``--actors`` actors x ``--per-actor`` memories of ``--dimensions``
   (default 1,000 x 1,000 x 384 = 1,000,000) by writing the records straight to the cluster with the
   keys and records ``Memories.add`` writes (``memories.records.MemoryRecord`` with its float32
   vector as ``encode_memory`` stores it, the actor's generation and the change log entries the
   scripts keep, the store-level entries of ``memories.store_level.queue_store_level``), in one
   pipeline per batch of actors (each actor's keys are one slot, each index partition's one;
   redis-py's cluster pipeline sends each node its own). Adding them through the API would take
   hours on this machine: the run measures the API's add rate on ``--api-adds`` memories and says
   how long a million would take that way.
2. **Memory**: ``used_memory`` (INFO memory) of each primary before and after, per memory and
   against the raw data (the float32 vector plus the text's UTF-8 bytes); keys and memory per
   shard and their max / min; how much of it the store-level indexes take (``MEMORY USAGE``),
   in their partitions (``database.keys.MemoryIndexKeys``); where one actor's and one session's keys
   are (one slot each) and how the actors and sessions spread over the shards.
3. **Reads** over HTTP, vectors supplied: recall (hybrid) and semantic search of random
   actors, warm (``--warm-actors`` actors asked again and again) and the first one per actor in
   a fresh stack process; the store's counts (``GET`` of the store); a store-wide search
   without ``actor_id`` (refused past ``memories.reads.STORE_WIDE_MAX_BYTES``: its answer and time).
4. **Appends**: ``--sessions`` sessions (default 10,000) each getting ``--appends`` turns of
   two messages from ``--processes`` client processes at once: messages per second overall and
   per shard (the sessions each primary holds, and the calls of ``INFO commandstats``).
5. **DELETE** of the store: its time, and a scan of every primary finding none of its keys.

Before seeding it checks that the machine has the memory the run needs (an estimate, and
``--headroom-gb`` left for the rest of the machine), and stops when it has not. Writes
``bench/results/scale.md`` and ``scale.png`` (not with ``--no-plot``: matplotlib is a bench
requirement, not a test one). Every call to the API goes through ``kividb_memory.MemoryClient``
with ``max_retries=0`` (each figure is one request) and a 300 s timeout, so a timed call
includes the client's encoding of the request and reading of its answer, as a user's does (about
0.25 ms for a 384-dimension search of 10 memories over a mock transport on this machine, the
JSON of the vector most of it); only the seeding and the memory and key figures talk to Redis
directly.

    make bench-scale
    python -m bench.scale --actors 100 --per-actor 1000 --sessions 1000      # a small run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from agent_memory.clock import SystemClock, to_ms
from agent_memory.database.keys import StoreKeys, actor_bucket
from agent_memory.memories.reads import STORE_WIDE_MAX_BYTES
from agent_memory.memories.records import MemoryRecord, encode_memory
from agent_memory.memories.scripts import log_kept
from agent_memory.memories.store_level import queue_store_level
from agent_memory.memories.writes import new_memory_id
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import STORED
from bench.latency import Corpus
from bench.measure import percentile
from kividb_memory import ApiConnectionError, ApiError, MemoryClient, StoreClient
from local.bootstrap import Cluster, start_redis_cluster, start_redis_server
from local.launch import running_stack
from tools.progress import Progress

RESULTS = ROOT / "bench" / "results"
API_KEY = "kvm_bench_scale_0123456789abcdefghijklmnop"
STORE = "scale"
INSTANCE = "local"
SEED = 20261201
LIMIT = 10
ACTORS_PER_PIPELINE = 8
TARGET_MEMORY_RATIO = 1.3
TARGET_SHARD_RATIO = 1.2


# --- the pieces --------------------------------------------------------------------------------


@dataclass
class Shard:
    port: int
    used_before: int = 0
    used_after: int = 0
    dataset_after: int = 0
    rss_after: int = 0
    keys: int = 0
    actors: int = 0
    sessions: int = 0
    messages: int = 0
    evalsha_calls: int = 0


@dataclass
class Report:
    args: argparse.Namespace
    started: str = ""
    commit: str = ""
    shards: list[Shard] = field(default_factory=list)
    memories: int = 0
    raw_vector_bytes: int = 0
    raw_text_bytes: int = 0
    seed_seconds: float = 0.0
    api_add_rate: float = 0.0
    store_level_bytes: dict[str, int] = field(default_factory=dict)
    """Bytes (``MEMORY USAGE``) of the store-level memory indexes, by index, all partitions."""
    store_level_by_port: dict[int, int] = field(default_factory=dict)
    """Bytes of the store-level memory indexes on each primary."""
    partitions_by_port: dict[int, int] = field(default_factory=dict)
    store_slot_port: int = 0
    """The primary of the store's own slot (session indexes, actor set)."""
    actor_keys: dict[str, int] = field(default_factory=dict)
    latency: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    counts_ms: float = 0.0
    store_wide: tuple[int, str, float] = (0, "", 0.0)
    baseline_scan_ms: float = 0.0
    kept_bytes: int = 0
    """``MEMORY USAGE`` of the kept indexes (``search.snapshot``) the warm reads wrote."""
    kept_actors: int = 0
    appends: dict[str, Any] = field(default_factory=dict)
    delete_seconds: float = 0.0
    keys_left: int = -1
    memory_check: str = ""
    baseline_appends: dict[str, Any] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)


def _nodes(cluster: Cluster) -> list[redis.Redis]:
    return [cluster.node(port) for port in cluster.ports[:3]]


def _client(url: str) -> MemoryClient:
    """The API's client for the run: no retries, so that each timed call is one request, and
    300 s for every phase of it (a store-wide count or DELETE of a million memories is slow)."""
    return MemoryClient(url, API_KEY, timeout=300, max_retries=0)


@contextmanager
def stack(cluster: Cluster, folder: Path, workers: int) -> Iterator[str]:
    env = {
        "REDIS_URL": cluster.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(folder / "local"),
        "KIVIDB_WORKERS": str(workers),
    }
    with running_stack(env, log=folder / f"stack-{time.monotonic_ns()}.log", timeout=120) as (
        url,
        _,
    ):
        yield url


def available_memory() -> int:
    """Bytes of memory available to new processes: ``MemAvailable`` of ``/proc/meminfo`` (what
    psutil reports on Linux; read here so that the test suite, which has no psutil, can run
    this), psutil's ``virtual_memory().available`` elsewhere."""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    import psutil  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return int(psutil.virtual_memory().available)


def check_memory(args: argparse.Namespace) -> str:
    """The estimate of what the run needs (Redis about 3 KB a memory at 384 dimensions, plus
    the vector's growth with ``dimensions``; the stack and this process about 2 GB) against
    what the machine has available; ``SystemExit`` when it would leave less than
    ``--headroom-gb``."""
    memories = args.actors * args.per_actor
    need = memories * (1500 + args.dimensions * 4 * 1.3) + 2 * 2**30
    available = available_memory()
    line = (
        f"{available / 2**30:.1f} GiB available before seeding; the run needs about "
        f"{need / 2**30:.1f} GiB and leaves at least {args.headroom_gb} GiB"
    )
    if available - need < args.headroom_gb * 2**30:
        raise SystemExit(f"bench.scale: not enough memory: {line}")
    return line


# --- seeding -----------------------------------------------------------------------------------


def seed(cluster: Cluster, config: StoreConfig, args: argparse.Namespace, report: Report) -> None:
    """Write every memory straight to the cluster (see the module docstring)."""
    client = cast(redis.Redis, RedisCluster.from_url(cluster.url, decode_responses=False))
    keys = config.keys()
    corpus = Corpus(args.dimensions, SEED)
    rng = np.random.default_rng(SEED)
    ttl_ms = config.memory_ttl_seconds * 1000
    now_ms = to_ms(SystemClock().now())
    started = time.monotonic()
    with Progress("bench scale").stage("seed", args.actors * args.per_actor, "memory") as bar:
        pipe = client.pipeline(transaction=False)
        rows: list[tuple[str, str, int, int]] = []
        for a in range(args.actors):
            actor_id = f"user-{a:05d}"
            bucket = actor_bucket(actor_id)
            actor = keys.actor(bucket)
            clusters = rng.integers(0, 200, size=args.per_actor)
            vectors = corpus.vectors(rng, clusters)
            texts = corpus.texts(rng, clusters)
            records: dict[Any, Any] = {}
            log: dict[Any, Any] = {}
            for i in range(args.per_actor):
                memory_id = new_memory_id(bucket)
                created_ms = now_ms - (args.per_actor - i) * 1000
                record = MemoryRecord(
                    id=memory_id,
                    text=texts[i],
                    type="semantic",
                    actor_id=actor_id,
                    created_at=created_ms,
                    updated_at=created_ms,
                    expires_at=created_ms + ttl_ms,
                )
                records[memory_id] = encode_memory(record, vectors[i].tobytes())
                if i >= args.per_actor - log_kept(args.per_actor):  # what the scripts keep
                    log[f"{i + 1}:+:{memory_id}"] = i + 1
                rows.append((memory_id, bucket, created_ms, created_ms + ttl_ms))
                report.raw_text_bytes += len(texts[i].encode("utf-8"))
            report.raw_vector_bytes += int(vectors.nbytes)
            pipe.hset(actor.memories, mapping=records)
            pipe.zadd(actor.log, log)
            pipe.hset(actor.meta, "gen", args.per_actor)
            if (a + 1) % ACTORS_PER_PIPELINE == 0 or a + 1 == args.actors:
                queue_store_level(pipe, keys, rows)
                rows = []
                pipe.execute()
                pipe = client.pipeline(transaction=False)
            bar.advance(args.per_actor)
    report.seed_seconds = time.monotonic() - started
    report.memories = args.actors * args.per_actor


def api_add_rate(url: str, args: argparse.Namespace) -> float:
    """Memories per second that ``POST .../memories`` keeps, one client, ``--api-adds`` adds
    to a store of their own (then deleted)."""
    rng = np.random.default_rng(7)
    name = "scale-api-adds"
    with _client(url) as client:
        client.put_store(INSTANCE, name, dimensions=args.dimensions, dedupe_threshold=1.0)
        store = client.store(INSTANCE, name)
        vectors = [
            [round(float(v), 6) for v in rng.standard_normal(args.dimensions)]
            for _ in range(args.api_adds)
        ]
        started = time.monotonic()
        for i, vector in enumerate(vectors):
            store.add_memory(f"fact number {i} about deploys", actor_id=f"a{i % 50}", vector=vector)
        rate = float(args.api_adds / (time.monotonic() - started))
        client.delete_store(INSTANCE, name)
    return rate


# --- measuring ---------------------------------------------------------------------------------


def memory_of(
    cluster: Cluster, config: StoreConfig, report: Report, args: argparse.Namespace
) -> None:
    keys = config.keys()
    slot_map = _slot_map(cluster)
    for shard, node in zip(report.shards, _nodes(cluster), strict=True):
        info = node.info("memory")
        shard.used_after = int(info["used_memory"])
        shard.dataset_after = int(info["used_memory_dataset"])
        shard.rss_after = int(info["used_memory_rss"])
        shard.keys = int(node.dbsize())
    report.store_slot_port = slot_map[key_slot(keys.memory_actors.encode())]
    for shard in report.shards:
        report.store_level_by_port[shard.port] = 0
        report.partitions_by_port[shard.port] = 0
    for part in keys.memory_partitions():
        port = slot_map[key_slot(part.memories.encode())]
        report.partitions_by_port[port] += 1
        node = cluster.node(port)
        for name in ("memories", "memory_expiry", "memory_owners", "memories_superseded"):
            size = int(node.memory_usage(getattr(part, name), samples=0) or 0)
            report.store_level_bytes[name] = report.store_level_bytes.get(name, 0) + size
            report.store_level_by_port[port] += size
    actors = int(cluster.node(report.store_slot_port).memory_usage(keys.memory_actors) or 0)
    report.store_level_bytes["memory_actors"] = actors
    report.store_level_by_port[report.store_slot_port] += actors
    sample = keys.actor(actor_bucket("user-00000"))
    node = cluster.node(slot_map[key_slot(sample.memories.encode())])
    for name, key in (
        ("records", sample.memories),
        ("vectors", sample.vectors),
        ("change log", sample.log),
        ("meta", sample.meta),
    ):
        report.actor_keys[name] = int(node.memory_usage(key, samples=0) or 0)
    slots = {key_slot(k.encode()) for k in sample.all()}
    report.actor_keys["slots"] = len(slots)
    by_port = {s.port: s for s in report.shards}
    for a in range(args.actors):
        slot = key_slot(keys.actor(actor_bucket(f"user-{a:05d}")).memories.encode())
        by_port[slot_map[slot]].actors += 1


def kept_of(
    cluster: Cluster, config: StoreConfig, report: Report, args: argparse.Namespace
) -> None:
    """The bytes of the kept indexes that the reads so far wrote (the actors read have one,
    the others none yet): what every actor's would add per memory once each is read."""
    slot_map = _slot_map(cluster)
    keys = config.keys()
    for a in range(args.actors):
        actor = keys.actor(actor_bucket(f"user-{a:05d}"))
        node = cluster.node(slot_map[key_slot(actor.index_parts[0].encode())])
        sizes = [int(node.memory_usage(part, samples=0) or 0) for part in actor.index_parts]
        if sizes[0]:
            report.kept_actors += 1
            report.kept_bytes += sum(sizes)


def _slot_map(cluster: Cluster) -> dict[int, int]:
    found = {}
    slots = cluster.node(cluster.ports[0]).execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
    for start, end, primary, *_ in slots:
        for slot in range(int(start), int(end) + 1):
            found[slot] = int(primary[1])
    return found


def reads(url: str, args: argparse.Namespace, report: Report, *, fresh: bool) -> None:
    """Recall and semantic search of random actors: warm, or the first per actor (fresh)."""
    rng = np.random.default_rng(SEED + (1 if fresh else 0))
    corpus = Corpus(args.dimensions, SEED)
    pick = random.Random(SEED + (1 if fresh else 0))
    queries = corpus.queries(rng, 200)
    with _client(url) as client:
        store = client.store(INSTANCE, STORE)
        if fresh:
            actors = pick.sample(range(args.actors), min(args.fresh_actors, args.actors))
            for op in ("recall", "search"):
                times = []
                for n, a in enumerate(actors):
                    if (op == "recall") == (n % 2 == 0):  # each actor cold for one op only
                        times.append(_call(store, op, f"user-{a:05d}", queries[n % len(queries)]))
                report.latency[f"{op}, first for the actor in a fresh process"] = times
            return
        actors = pick.sample(range(args.actors), min(args.warm_actors, args.actors))
        for a in actors:  # load them in every worker
            for _ in range(4):
                _call(store, "recall", f"user-{a:05d}", queries[0])
        for op in ("recall", "search"):
            times = [
                _call(store, op, f"user-{actors[n % len(actors)]:05d}", queries[n % len(queries)])
                for n in range(args.requests)
            ]
            report.latency[f"{op}, warm ({len(actors)} random actors)"] = times


def _call(store: StoreClient, op: str, actor: str, query: Any) -> float:
    """Milliseconds of one recall (``op`` ``"recall"``) or semantic search of ``actor`` with
    ``query``'s vector; ``RuntimeError`` unless it found ``LIMIT`` memories."""
    started = time.perf_counter()
    if op == "recall":
        found = store.recall(
            f"scale-reader-{actor}",
            query=query.text,
            actor_id=actor,
            limit=LIMIT,
            query_vector=query.values,
        ).memories
    else:
        found = store.search(
            query.text, mode="semantic", actor_id=actor, limit=LIMIT, query_vector=query.values
        ).memories
    elapsed = (time.perf_counter() - started) * 1000
    if len(found) != LIMIT:
        raise RuntimeError(f"{op} of {actor} gave {len(found)} memories")
    return elapsed


COUNT_REQUESTS = 9
"""``GET`` of the store asked this many times (over the stack's workers); the median counts."""


def counts_and_store_wide(url: str, args: argparse.Namespace, report: Report) -> None:
    """The store's counts (``GET`` of the store) and a store-wide search without ``actor_id``:
    its status, ``"200"`` / the error's message for 409 / its code otherwise, and milliseconds."""
    with _client(url) as client:
        times = []
        for _ in range(COUNT_REQUESTS):
            started = time.perf_counter()
            view = client.get_store(INSTANCE, STORE)
            times.append((time.perf_counter() - started) * 1000)
        report.counts_ms = percentile(times, 50)
        assert view.counts is not None  # get_store always has them
        report.counts = view.counts.model_dump()
        query = Corpus(args.dimensions, SEED).queries(np.random.default_rng(3), 1)[0]
        started = time.perf_counter()
        try:
            client.store(INSTANCE, STORE).search(
                query.text, mode="semantic", query_vector=query.values
            )
        except ApiError as exc:
            elapsed = (time.perf_counter() - started) * 1000
            report.store_wide = (
                exc.status,
                exc.message if exc.status == 409 else exc.code,
                elapsed,
            )
        else:
            report.store_wide = (200, "200", (time.perf_counter() - started) * 1000)


# --- appends from several processes ------------------------------------------------------------


def _appender(url: str, sessions: list[str], appends: int, threads: int, out: Any, go: Any) -> None:
    """One client process: ``threads`` threads appending ``appends`` turns to each session,
    once every process is ready (``go``); puts ``(done, failed, seconds)`` on ``out``: messages
    acknowledged, and the appends not acknowledged by status (``"no answer"`` for a timeout
    or a broken connection)."""
    done: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    lock = threading.Lock()
    clients = [_client(url) for _ in range(threads)]
    for client in clients:
        client.get_store(INSTANCE, STORE)  # connected, and the worker's functions imported

    def work(client: MemoryClient, mine: list[str]) -> None:
        store = client.store(INSTANCE, STORE)
        for turn in range(appends):
            for session in mine:
                events = [
                    {"role": "user", "content": f"turn {turn} of {session}: where?"},
                    {"role": "assistant", "content": "eu-west-1, on Fridays."},
                ]
                try:
                    store.add_events(session, events, actor_id=f"{session}-actor")
                except ApiError as exc:
                    outcome = str(exc.status)
                except ApiConnectionError:
                    outcome = "no answer"
                else:
                    outcome = ""
                with lock:
                    if outcome:
                        failed[outcome] += 1
                    else:
                        done["messages"] += 2

    parts = [sessions[i::threads] for i in range(threads)]
    workers = [
        threading.Thread(target=work, args=(c, p)) for c, p in zip(clients, parts, strict=True)
    ]
    out.put("ready")
    go.wait()
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    seconds = time.monotonic() - started
    for client in clients:
        client.close()
    out.put((dict(done), dict(failed), seconds))


def send_appends(url: str, sessions: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """``--appends`` turns to each of ``sessions`` from ``--processes`` client processes of
    ``--threads`` threads, timed from the moment every process is ready."""
    context = multiprocessing.get_context("spawn")
    queue: Any = context.Queue()
    go = context.Event()
    processes = [
        context.Process(
            target=_appender,
            args=(url, sessions[p :: args.processes], args.appends, args.threads, queue, go),
        )
        for p in range(args.processes)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        assert queue.get() == "ready"
    started = time.monotonic()
    go.set()
    results = [queue.get() for _ in processes]
    seconds = time.monotonic() - started
    for process in processes:
        process.join()
    messages = sum(r[0].get("messages", 0) for r in results)
    failed: Counter[str] = Counter()
    for _, bad, _ in results:
        failed.update(bad)
    return {
        "messages": messages,
        "seconds": seconds,
        "rate": messages / seconds,
        "failed": dict(failed),
        "sessions": len(sessions),
    }


def appends(
    url: str, cluster: Cluster, config: StoreConfig, args: argparse.Namespace, report: Report
) -> None:
    sessions = [f"chat-{n:05d}" for n in range(args.sessions)]
    before = [
        int(n.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
        for n in _nodes(cluster)
    ]
    report.appends = send_appends(url, sessions, args)
    after = [
        int(n.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
        for n in _nodes(cluster)
    ]
    keys = config.keys()
    slot_map = _slot_map(cluster)
    by_port = {s.port: s for s in report.shards}
    for session in sessions:
        port = slot_map[key_slot(keys.session(session).meta.encode())]
        by_port[port].sessions += 1
        by_port[port].messages += 2 * args.appends
    for shard, b, a in zip(report.shards, before, after, strict=True):
        shard.evalsha_calls = a - b
    one = keys.session(sessions[0])
    report.appends["one_session_slots"] = len(
        {key_slot(k.encode()) for k in [one.meta, one.messages, one.lock]}
    )


def baseline_appends(folder: Path, args: argparse.Namespace, report: Report) -> None:
    """The same appends (at most 2,000 sessions) on one ``redis-server`` in the same run."""
    database = start_redis_server(folder / "single", persist=False)
    try:
        env = {
            "REDIS_URL": database.url,
            "KIVIDB_API_KEY": API_KEY,
            "KIVIDB_LOCAL_DIR": str(folder / "single-local"),
            "KIVIDB_WORKERS": str(args.workers),
        }
        with running_stack(env, log=folder / "single.log", timeout=120) as (url, _):
            with _client(url) as client:
                client.put_store(INSTANCE, STORE, dimensions=args.dimensions)
            sessions = [f"chat-{n:05d}" for n in range(min(2000, args.sessions))]
            report.baseline_appends = send_appends(url, sessions, args)
    finally:
        database.stop()


# --- the run -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> Report:
    """The whole run (the module docstring's steps 1 to 5) with ``parse_args``'s ``args``; the
    cluster, stacks and their data are gone when it returns. ``SystemExit`` from
    ``check_memory``; an ``kividb_memory.ApiError`` when a call other than an append or the
    store-wide search is refused."""
    report = Report(args, started=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    report.commit = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()
    report.memory_check = check_memory(args)
    report.load = [os.getloadavg()[0]]
    with TemporaryDirectory() as data:
        folder = Path(data)
        baseline_appends(folder, args, report)
        cluster = start_redis_cluster(folder / "cluster")
        try:
            report.shards = [Shard(port) for port in cluster.ports[:3]]
            with stack(cluster, folder, args.workers) as url:
                with _client(url) as client:
                    client.put_store(INSTANCE, STORE, dimensions=args.dimensions)
                for shard, node in zip(report.shards, _nodes(cluster), strict=True):
                    shard.used_before = int(node.info("memory")["used_memory"])
                raw = cluster.node(cluster.ports[0])
                entry = RedisCluster.from_url(cluster.url, decode_responses=True).hget(
                    StoreKeys.registry, STORE
                )
                config = StoreConfig.model_validate_json(cast(str, entry), context=STORED)
                del raw
                seed(cluster, config, args, report)
                memory_of(cluster, config, report, args)
                report.api_add_rate = api_add_rate(url, args)
                counts_and_store_wide(url, args, report)
                reads(url, args, report, fresh=False)
                kept_of(cluster, config, report, args)
                corpus = Corpus(args.dimensions, SEED)
                matrix = corpus.vectors(np.random.default_rng(1), np.zeros(args.per_actor, int))
                query = corpus.queries(np.random.default_rng(2), 1)[0].vector
                started = time.perf_counter()
                for _ in range(50):
                    scores = matrix @ query
                    np.argpartition(-scores, LIMIT - 1)[:LIMIT]
                report.baseline_scan_ms = (time.perf_counter() - started) * 1000 / 50
            with stack(cluster, folder, args.workers) as url:
                reads(url, args, report, fresh=True)
                appends(url, cluster, config, args, report)
                with _client(url) as client:
                    started = time.monotonic()
                    client.delete_store(INSTANCE, STORE)
                    report.delete_seconds = time.monotonic() - started
            pattern = config.keys().all_pattern
            report.keys_left = sum(
                len(list(n.scan_iter(match=pattern, count=1000))) for n in _nodes(cluster)
            )
        finally:
            cluster.stop()
    report.load.append(os.getloadavg()[0])
    return report


# --- the report --------------------------------------------------------------------------------


def _ratio(values: list[int]) -> float:
    return max(values) / max(min(values), 1)


def write(report: Report, out: Path, *, plot_it: bool = True) -> str:
    """Write ``scale.md`` (and ``scale.png`` when ``plot_it``) to ``out``; the Markdown."""
    args = report.args
    n = report.memories
    used = sum(s.used_after - s.used_before for s in report.shards)
    raw = report.raw_vector_bytes + report.raw_text_bytes
    per_memory = used / n
    kept = report.kept_bytes / max(1, report.kept_actors * args.per_actor)
    raw_per_memory = raw / n
    store_level = sum(report.store_level_bytes.values())
    actor_total = sum(v for k, v in report.actor_keys.items() if k != "slots")
    lines = [
        "# Scale: a million memories on a three-primary cluster",
        "",
        f"Run {report.started} at `{report.commit}` by `python -m bench.scale "
        f"{' '.join(sys.argv[1:])}`".rstrip()
        + ". Redis 7 cluster of three primaries (no "
        "replicas) on loopback, the local stack on it "
        f"({args.workers} worker processes), this 2-core machine, shared (load average "
        f"{' at the start, '.join(f'{x:.1f}' for x in report.load)} at the end). "
        f"{report.memory_check}.",
        "",
        f"One store, {args.actors:,} actors x {args.per_actor:,} memories of "
        f"{args.dimensions} dimensions = **{n:,} memories**, seeded by writing the records "
        "straight to the cluster with the keys and records `Memories.add` writes (records "
        "with their vectors, the actor's generation and change log, the store-level listing, "
        f"expiry and owner indexes in their {sum(report.partitions_by_port.values())} "
        f"partitions, the actor set) in {report.seed_seconds:.0f} s. Through the API, one client "
        f"keeps {report.api_add_rate:,.0f} memories/s here (measured on {args.api_adds} adds), "
        f"so a million would take about {n / max(report.api_add_rate, 1) / 3600:.1f} h.",
        "",
        "## Memory",
        "",
        "| | bytes |",
        "|---|---|",
        "| Redis memory per memory (`used_memory` after - before, summed over the primaries, "
        f"/ {n:,}) | **{per_memory:,.0f}** |",
        f"| raw data per memory: float32 vector ({args.dimensions * 4:,}) + text (UTF-8, "
        f"{report.raw_text_bytes / n:.0f} on average) | {raw_per_memory:,.0f} |",
        f"| ratio (target <= {TARGET_MEMORY_RATIO}) | **{per_memory / raw_per_memory:.2f}** |",
        f"| of which the store-level indexes (all partitions, `MEMORY USAGE`) | "
        f"{store_level / n:,.0f} |",
        f"| an actor's kept index (`MEMORY USAGE` of the {report.kept_actors} written by the "
        f"warm reads, / their {report.kept_actors * args.per_actor:,} memories) | "
        f"{kept:,.0f} |",
        f"| Redis memory per memory with every actor's kept index (projected: the two above) "
        f"| **{per_memory + kept:,.0f}** (+{100 * kept / per_memory:.0f}%, target <= +25%: "
        f"{'PASS' if kept <= 0.25 * per_memory else 'FAIL'}) |",
        "",
        f"One actor's keys, `MEMORY USAGE` (its {args.per_actor:,} memories; "
        f"{report.actor_keys.get('slots')} slot): "
        + ", ".join(f"{k} {v:,} B" for k, v in report.actor_keys.items() if k != "slots")
        + f"; {actor_total / args.per_actor:,.0f} B per memory. Store-level indexes, all "
        "partitions: "
        + ", ".join(f"{k} {v / 2**20:,.1f} MiB" for k, v in report.store_level_bytes.items())
        + ".",
        "",
        "## Shards",
        "",
        "| primary | keys | actors | index partitions (MiB) | `used_memory` (MiB) | dataset "
        "(MiB) | RSS (MiB) | sessions | messages | EVALSHA calls during the appends |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report.shards:
        mark = " (the store's slot)" if s.port == report.store_slot_port else ""
        lines.append(
            f"| {s.port}{mark} | {s.keys:,} | {s.actors} | "
            f"{report.partitions_by_port.get(s.port, 0)} "
            f"({report.store_level_by_port.get(s.port, 0) / 2**20:,.0f}) | "
            f"{s.used_after / 2**20:,.0f} | "
            f"{s.dataset_after / 2**20:,.0f} | {s.rss_after / 2**20:,.0f} | {s.sessions:,} | "
            f"{s.messages:,} | {s.evalsha_calls:,} |"
        )
    used_by = [s.used_after - s.used_before for s in report.shards]
    without = [
        u - report.store_level_by_port.get(s.port, 0)
        for u, s in zip(used_by, report.shards, strict=True)
    ]
    lines += [
        "",
        f"Max / min (target within {TARGET_SHARD_RATIO}): keys "
        f"{_ratio([s.keys for s in report.shards]):.2f}, memory "
        f"**{_ratio(used_by):.2f}** ({_ratio(without):.2f} without the store-level indexes), "
        f"actors {_ratio([s.actors for s in report.shards]):.2f}, sessions "
        f"{_ratio([s.sessions for s in report.shards]):.2f}. One session's keys are on "
        f"{report.appends.get('one_session_slots')} slot, one actor's on "
        f"{report.actor_keys.get('slots')}.",
        "",
        "## Reads (HTTP through the local stack, vectors supplied, limit 10)",
        "",
        "| what | requests | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for name, times in report.latency.items():
        lines.append(
            f"| {name} | {len(times)} | {percentile(times, 50):.1f} | {percentile(times, 99):.1f} |"
        )
    status, message, ms = report.store_wide
    lines += [
        "",
        f"Baseline in the same run: an in-process exact NumPy scan of one actor's "
        f"{args.per_actor:,} x {args.dimensions} takes {report.baseline_scan_ms:.2f} ms.",
        "",
        f"`GET` of the store (counts), median of {COUNT_REQUESTS}: {report.counts_ms:.0f} ms, "
        f"`{json.dumps(report.counts)}`.",
        "",
        f'Store-wide search without `actor_id`: {status} in {ms:.0f} ms: "{message}" '
        f"(bound: {STORE_WIDE_MAX_BYTES // 2**20} MiB of vectors, "
        f"{STORE_WIDE_MAX_BYTES // (args.dimensions * 4):,} memories of {args.dimensions} "
        "dimensions).",
        "",
        "## Appends",
        "",
        f"{args.sessions:,} sessions, {args.appends} turns of 2 messages each, from "
        f"{args.processes} client processes of {args.threads} threads: "
        f"**{report.appends.get('messages', 0):,} messages in "
        f"{report.appends.get('seconds', 0):.1f} s = {report.appends.get('rate', 0):,.0f} "
        f"messages/s**; not acknowledged: {report.appends.get('failed') or 'none'}. The same "
        f"appends to {report.baseline_appends.get('sessions', 0):,} sessions on one "
        f"`redis-server` in the same run: {report.baseline_appends.get('rate', 0):,.0f} "
        f"messages/s (cluster / single node: "
        f"{report.appends.get('rate', 0) / max(report.baseline_appends.get('rate', 1), 1e-9):.2f})"
        ". Per shard "
        "(sessions and messages above): "
        + ", ".join(
            f"{s.port} {s.messages / max(report.appends.get('seconds', 1), 1e-9):,.0f}/s"
            for s in report.shards
        )
        + ". Every append also updates the store's session indexes, on the primary of the "
        "store's slot (its EVALSHA calls above).",
        "",
        "## DELETE",
        "",
        f"`DELETE` of the store: {report.delete_seconds:.1f} s; keys of the store left on the "
        f"three primaries afterwards: {report.keys_left}.",
        "",
    ]
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.md").write_text(text, encoding="utf-8")
    if plot_it:
        plot(report, out / "scale.png")
    return text


def plot(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ports = [str(s.port) for s in report.shards]
    used = [(s.used_after - s.used_before) / 2**20 for s in report.shards]
    store = [report.store_level_by_port.get(s.port, 0) / 2**20 for s in report.shards]
    left.bar(ports, [u - x for u, x in zip(used, store, strict=True)], label="actors' keys")
    left.bar(
        ports,
        store,
        bottom=[u - x for u, x in zip(used, store, strict=True)],
        label="store-level indexes",
    )
    left.set_title(f"Redis memory per primary, {report.memories:,} memories")
    left.set_ylabel("MiB")
    left.legend()
    names = list(report.latency)
    p50 = [percentile(report.latency[n], 50) for n in names]
    p99 = [percentile(report.latency[n], 99) for n in names]
    at = np.arange(len(names))
    right.bar(at - 0.2, p50, 0.4, label="p50")
    right.bar(at + 0.2, p99, 0.4, label="p99")
    right.set_xticks(at, [n.replace(", ", "\n") for n in names], fontsize=7)
    right.set_ylabel("ms")
    right.set_title("Recall and search over HTTP")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m bench.scale`` (``run``'s ``args``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--actors", type=int, default=1000)
    parser.add_argument("--per-actor", type=int, default=1000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=2, help="turns per session")
    parser.add_argument("--processes", type=int, default=4, help="client processes appending")
    parser.add_argument("--threads", type=int, default=4, help="threads per client process")
    parser.add_argument("--workers", type=int, default=2, help="the stack's worker processes")
    parser.add_argument("--warm-actors", type=int, default=20)
    parser.add_argument("--fresh-actors", type=int, default=60)
    parser.add_argument("--requests", type=int, default=400, help="warm requests per op")
    parser.add_argument("--api-adds", type=int, default=500)
    parser.add_argument("--headroom-gb", type=float, default=6.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--no-plot",
        action="store_true",
        help="write scale.md only (the test suite's run: matplotlib is a bench requirement)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run (``run``), write ``scale.md`` and ``scale.png`` to ``--out``, print it; exit 0."""
    args = parse_args(argv)
    report = run(args)
    print(write(report, args.out, plot_it=not args.no_plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
