"""Reads sized for a Lambda (``make bench-reads``; issue 32, docs/usage.md, docs/limits.md).

Two measurements, each against a baseline measured in the same run:

1. **Organization usage.** What ``--stores`` stores of one database hold now
   (``stores.holding.instance_holding``, what ``GET /usage`` reads of each instance), on a
   database of ``--keys`` keys, against the way it was read before: each store's
   ``store_holding`` one after another, a scan of the whole database each, timed on
   ``--baseline-stores`` of them and projected to every store (reading all of them would take
   minutes). Target: within 7 s for 1,000 stores, the time ``GET /usage`` waits for an
   instance (the function has 10 s; past 7 s the instance is named under ``unreachable``).
   The figures must match: the sum of the baseline's on the stores it read equals
   ``instance_holding`` of those stores.
2. **Keyed search memory.** A search (newest first, ``limit`` 100) over ``--values`` keyed
   memories of 60 KB under one prefix, in a fresh process each: the peak of the memory Python
   allocated during the search (``tracemalloc``; and the growth of the process's peak resident
   memory, ``ru_maxrss``, over the search, 0 when it stays under the imports' peak), the search
   of ``keyed.ranking`` against the one before it (every entry under the prefix read and decoded
   at once). Target: under the 16 MB docs/limits.md states for the search besides its page,
   with the page (100 values of 60 KB, decoded) under 64 MB, flat in the number of values.

``python -m bench.reads [--stores 1000] [--keys 300000] [--baseline-stores 20]
[--values 1000 4000] [--out DIR]``; the table goes to ``DIR/reads.md`` with its plot
``reads.png`` (default ``bench/results``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory

import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock, to_ms
from agent_memory.database.partitions import counted, queue_count
from agent_memory.keyed.models import KeyedMemoryPut, KeyedSearchRequest
from agent_memory.keyed.records import Entry
from agent_memory.keyed.service import KeyedMemories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.holding import Holding, instance_holding, store_holding
from agent_memory.stores.models import StoreConfig, StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import start_redis_server
from tools.progress import Progress

RESULTS = Path(__file__).resolve().parent / "results"
USAGE_TARGET_SECONDS = 7.0
SEARCH_TARGET_MB = 64.0
VALUE = {"notes": ["x" * 59] * 1000}
"""A keyed value of 60 KB of JSON (a thousand strings once decoded)."""
NAMESPACES = 8


def _fill(client: redis.Redis, config: StoreConfig, keys_each: int, now_ms: int) -> None:
    """About ``keys_each`` keys of ``config``'s store as its writes leave them: ten sessions
    with their messages, memories in the partitions' indexes, and records."""
    keys = config.keys()
    base = keys.all_pattern.removesuffix("*")
    with client.pipeline(transaction=False) as pipe:
        for s in range(10):
            pipe.zadd(keys.session_expiry, {f"s{s}": now_ms + 3_600_000})
            pipe.zadd(keys.session(f"s{s}").messages, {f"{m}:{{}}": m for m in range(20)})
        parts = keys.memory_partitions()
        for m in range(50):
            pipe.zadd(parts[m % len(parts)].memory_expiry, {f"m{m}": now_ms + 3_600_000})
        for i in range(max(keys_each - 10 - len(parts), 0)):
            pipe.set(f"{base}actor:{{a{i}}}:memories", "x" * 200)
        pipe.execute()


def usage(url: str, stores: int, keys: int, baseline_stores: int) -> dict[str, float]:
    """Measurement 1 (module docstring) on the database at ``url``."""
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    clock = SystemClock()
    registry = Stores(client, "bench", FernetCipher(Fernet.generate_key()), clock)
    now_ms = to_ms(clock.now())
    progress = Progress("bench reads: filling")
    for n in progress.each("stores", range(stores), "store"):
        config, _ = registry.put(f"store{n}", StorePut(dimensions=3))
        _fill(client, config, keys // stores, now_ms)
    configs = registry.all()
    keyspace = int(client.dbsize())

    def memories_of(config: StoreConfig) -> int:
        with client.pipeline(transaction=False) as pipe:
            queue_count(pipe, config.keys(), now_ms)
            return counted(pipe.execute())

    sample = configs[:baseline_stores]
    start = time.perf_counter()
    each = [store_holding(client, c, clock, partial(memories_of, c)) for c in sample]
    baseline_each = (time.perf_counter() - start) / len(sample)
    start = time.perf_counter()
    together = instance_holding(client, configs, clock)
    seconds = time.perf_counter() - start
    check = instance_holding(client, sample, clock)
    same = check == Holding(
        sessions=sum(h.sessions for h in each),
        messages=sum(h.messages for h in each),
        memories=sum(h.memories for h in each),
        bytes=sum(h.bytes for h in each),
    )
    return {
        "stores": len(configs),
        "keyspace": keyspace,
        "seconds": seconds,
        "baseline_store_s": baseline_each,
        "baseline_projected_s": baseline_each * len(configs),
        "baseline_110_s": baseline_each * 110,
        "ratio": baseline_each * len(configs) / seconds,
        "same": float(same),
        "sessions": together.sessions,
        "bytes": together.bytes,
    }


def keyed_fill(url: str, values: int) -> None:
    """``values`` keyed memories of 60 KB under the prefix ``["wide"]`` of store ``keyed``."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    clock = SystemClock()
    registry = Stores(
        redis.Redis.from_url(url, decode_responses=True),
        "bench",
        FernetCipher(Fernet.generate_key()),
        clock,
    )
    config, _ = registry.put("keyed", StorePut(dimensions=3))
    memories = KeyedMemories(StoreDatabase(client, client, config, clock), NoEmbedder(3))
    for i in range(values):
        put = KeyedMemoryPut(namespace=["wide", f"n{i % NAMESPACES}"], key=f"k{i}", value=VALUE)
        memories.put(put)


def _baseline_search(memories: KeyedMemories, client: redis.Redis, config: StoreConfig) -> int:
    """The search as it was before issue 32: every entry under the prefix read at once (one
    pipeline of ``HGETALL`` and ``ZRANGE``), decoded, sorted, then cut to the page."""
    now_ms = to_ms(SystemClock().now())
    keys = [memories._namespace_keys(["wide", f"n{n}"]) for n in range(NAMESPACES)]
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.hgetall(k.items)
        pipe.zrange(k.expiry, 0, -1, withscores=True)
    replies = pipe.execute()
    found: list[tuple[Entry, float]] = []
    for items, expiries in zip(replies[::2], replies[1::2], strict=True):
        expiry_of = {member: float(score) for member, score in expiries}
        for field, raw in items.items():
            expiry = expiry_of.get(field)
            if expiry is not None and expiry > now_ms:
                found.append((Entry(raw), expiry))
    found.sort(key=lambda f: (-f[0].record.updated_at, f[0].record.namespace, f[0].record.key))
    page = [entry.view(expiry) for entry, expiry in found[:100]]
    return len(page)


def keyed_child(url: str, variant: str) -> dict[str, float]:
    """In a fresh process: a search of ``variant`` (``chunked`` or ``baseline``), its seconds
    and the growth of the process's peak resident memory (MB) over it; then the same search
    again under ``tracemalloc``, for the peak of what Python allocated (MB)."""
    client = redis.Redis.from_url(url)
    clock = SystemClock()
    config = Stores(
        redis.Redis.from_url(url, decode_responses=True),
        "bench",
        FernetCipher(Fernet.generate_key()),
        clock,
    ).get("keyed")
    memories = KeyedMemories(StoreDatabase(client, client, config, clock), NoEmbedder(3))
    memories.search(KeyedSearchRequest(namespace_prefix=["nothing"], limit=1))  # warm imports

    def search() -> int:
        if variant == "baseline":
            return _baseline_search(memories, client, config)
        request = KeyedSearchRequest(namespace_prefix=["wide"], limit=100)
        return len(memories.search(request).items)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    items = search()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()  # a second search, traced (tracing makes it several times slower)
    search()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "seconds": seconds,
        "peak_mb": peak / 1e6,
        "rss_growth_mb": (after - before) / 1024,
        "items": items,
    }


def keyed(url: str, values: int) -> dict[str, float]:
    """Measurement 2 (module docstring) for ``values`` values: both searches, each in a
    process of its own."""
    keyed_fill(url, values)
    row: dict[str, float] = {"values": values}
    for variant in ("baseline", "chunked"):
        done = subprocess.run(
            [sys.executable, "-m", "bench.reads", "--child", variant, "--url", url],
            check=True,
            capture_output=True,
            text=True,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
        row[f"{variant}_mb"] = found["peak_mb"]
        row[f"{variant}_rss_mb"] = found["rss_growth_mb"]
        row[f"{variant}_s"] = found["seconds"]
        row[f"{variant}_items"] = found["items"]
    row["ratio"] = row["baseline_mb"] / max(row["chunked_mb"], 0.1)
    return row


def main(argv: list[str] | None = None) -> int:
    """Both measurements on a database of their own; writes ``reads.md`` and ``reads.png``
    under ``--out``; 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.reads")
    parser.add_argument("--stores", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=300_000)
    parser.add_argument("--baseline-stores", type=int, default=20)
    parser.add_argument("--values", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=["baseline", "chunked"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(keyed_child(args.url, args.child)))
        return 0
    with TemporaryDirectory() as tmp:
        database = start_redis_server(Path(tmp) / "redis", persist=False)
        try:
            used = usage(database.url, args.stores, args.keys, args.baseline_stores)
            print(f"usage: {used}")
            searched = []
            for values in args.values:
                searched.append(keyed(database.url, values))
                print(f"keyed search: {searched[-1]}")
        finally:
            database.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    report(args, used, searched)
    plot(args, used, searched)
    return 0


def report(
    args: argparse.Namespace, used: dict[str, float], searched: list[dict[str, float]]
) -> None:
    """``reads.md`` under ``args.out``."""
    fast = used["seconds"] <= USAGE_TARGET_SECONDS and used["same"] == 1.0
    flat = all(r["chunked_mb"] <= SEARCH_TARGET_MB and r["chunked_items"] == 100 for r in searched)
    baseline_items = ", ".join(f"{r['baseline_items']:.0f}" for r in searched)
    chunked_items = ", ".join(f"{r['chunked_items']:.0f}" for r in searched)
    lines = [
        "# Reads sized for a Lambda",
        "",
        f"`make bench-reads` ({datetime.now(UTC):%Y-%m-%d}, this machine, one Redis server of "
        "its own).",
        "",
        "| Figure | Measured | Baseline (same run) | Target | |",
        "|---|---|---|---|---|",
        f"| what {used['stores']:,.0f} stores hold now (`GET /usage`'s read of an instance), "
        f"database of {used['keyspace']:,.0f} keys | {used['seconds']:.2f} s | "
        f"{used['baseline_projected_s']:,.0f} s read one after another "
        f"({used['baseline_store_s'] * 1000:.0f} ms a store over {args.baseline_stores}, "
        f"{used['ratio']:,.0f}x; 110 stores: {used['baseline_110_s']:.1f} s) | "
        f"within {USAGE_TARGET_SECONDS:g} s, the same figures | {'PASS' if fast else 'FAIL'} |",
    ]
    for r in searched:
        lines.append(
            f"| keyed search, newest 100 of {r['values']:,.0f} values of 60 KB: peak memory "
            f"(tracemalloc; resident growth) | {r['chunked_mb']:.0f} MB; "
            f"{r['chunked_rss_mb']:.0f} MB; {r['chunked_s']:.2f} s | {r['baseline_mb']:.0f} MB; "
            f"{r['baseline_rss_mb']:.0f} MB; {r['baseline_s']:.2f} s, every entry at once "
            f"({r['ratio']:.0f}x) | under {SEARCH_TARGET_MB:g} MB with its page, whatever the "
            f"number | {'PASS' if r['chunked_mb'] <= SEARCH_TARGET_MB else 'FAIL'} |"
        )
    lines += [
        "",
        "Organization usage: the stores' keys as their writes leave them (ten sessions of 20 "
        "messages, 50 memories over the 64 partitions' indexes, records), the same number of "
        "keys each. The baseline is the read before issue 32: each store's `store_holding`, "
        "which scans the whole database for its keys, timed on the first "
        f"{args.baseline_stores} stores and projected to all (its figures for those stores are "
        "the new read's: "
        f"{'the same' if used['same'] == 1.0 else 'NOT the same'}). The new read scans the "
        "database once by a script that sums each key's bytes by store as it goes, and reads "
        "each store's sessions, messages and memories by one script, sent in pipelines of 100; "
        "`GET /usage` reads the instances concurrently and waits 7 s for them at most.",
        "",
        "Keyed search: each search in a fresh process, the peak of what Python allocated during "
        "it (`tracemalloc`), and the process's peak resident memory (`ru_maxrss`) after the "
        "search less before it (0 when the search stays under the peak the imports left). The "
        "search reads 64 entries at a time and keeps "
        "only the rank of each; the page's 100 entries are read again at the end. "
        f"Items answered: the baseline {baseline_items}, the search {chunked_items}. "
        f"{'PASS' if flat else 'FAIL'}: flat in the number of values.",
        "",
        "![reads](reads.png)",
    ]
    (args.out / "reads.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'reads.md'}")


def plot(
    args: argparse.Namespace, used: dict[str, float], searched: list[dict[str, float]]
) -> None:
    """Left: the usage read's seconds against the baseline's. Right: the keyed search's peak
    memory growth against the number of values, both searches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    names = ["one pass (now)", "one scan per store\n(before, projected)"]
    heights = [used["seconds"], used["baseline_projected_s"]]
    left.bar(names, heights, color=["tab:blue", "tab:gray"])
    left.axhline(10, color="tab:red", linestyle="--", label="the function's timeout (10 s)")
    left.set_yscale("log")
    left.set_ylabel("seconds")
    left.set_title(
        f"what {used['stores']:,.0f} stores hold, {used['keyspace']:,.0f} keys", fontsize=9
    )
    left.legend(fontsize=8)
    values = [r["values"] for r in searched]
    right.plot(
        values,
        [r["baseline_mb"] for r in searched],
        "o-",
        color="tab:gray",
        label="every entry at once (before)",
    )
    right.plot(
        values,
        [r["chunked_mb"] for r in searched],
        "o-",
        color="tab:blue",
        label="64 entries at a time (now)",
    )
    right.axhline(SEARCH_TARGET_MB, color="tab:red", linestyle="--", label="stated bound")
    right.set_xlabel("keyed values of 60 KB under the prefix")
    right.set_ylabel("peak memory of the search (MB, tracemalloc)")
    right.set_title("keyed search, newest 100", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "reads.png", dpi=110)
    print(f"wrote {args.out / 'reads.png'}")


if __name__ == "__main__":
    raise SystemExit(main())
