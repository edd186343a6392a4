"""What an organization's stores hold now, read for ``GET /usage`` (``stores.holding``): the
same figures as each store's own usage, summed, in one scan of the database however many stores
(issue 32: 110 stores read one after another, a scan each, took 30.4 s on 300,000 keys against
the function's 10 s). On a server of its own: its command counts are the test's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from cryptography.fernet import Fernet
from redis.cluster import RedisCluster

from agent_memory.clock import SystemClock, to_ms
from agent_memory.database.client import is_cluster, real_client
from agent_memory.database.partitions import counted, queue_count
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores import holding
from agent_memory.stores.holding import BATCH, Holding, instance_holding, store_holding
from agent_memory.stores.models import StoreConfig, StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import start_redis_server
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.handlers import build, invoke

STORES = 60


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Iterator[redis.Redis]:
    server = start_redis_server(tmp_path_factory.mktemp("usage-reads"), persist=False)
    try:
        yield redis.Redis.from_url(server.url, decode_responses=True)
    finally:
        server.stop()


def _fill(client: redis.Redis, config: StoreConfig, n: int, now_ms: int) -> None:
    """Sessions (live and expired), messages, memories (live, superseded, expired) and other
    keys of ``config``'s store, as its writes leave them."""
    keys = config.keys()
    with client.pipeline(transaction=False) as pipe:
        for s in range(n % 4 + 1):
            expiry = now_ms + 60_000 if s else now_ms - 1  # the first one expired
            pipe.zadd(keys.session_expiry, {f"s{s}": expiry})
            pipe.zadd(
                keys.session(f"s{s}").messages, {f"{m}:{{}}": m for m in range(s + n % 3 + 1)}
            )
        for m in range(n % 5 + 2):  # each memory in one partition, m0 superseded
            part = keys.memory_partitions()[m * 7 % len(keys.memory_partitions())]
            pipe.zadd(part.memory_expiry, {f"m{m}": now_ms + 1000, f"gone{m}": now_ms - 1})
            if not m:
                pipe.zadd(part.memories_superseded, {"m0": now_ms + 1000})
        for i in range(40):
            pipe.set(f"{keys.all_pattern.removesuffix('*')}idempotency:{i}", "x" * (n + i))
        pipe.execute()


def test_the_organizations_stores_are_read_together_in_one_scan_with_each_stores_figures(
    database, monkeypatch
):
    database.flushdb()
    clock = MovableClock()
    stores = Stores(database, "db", FernetCipher(Fernet.generate_key()), clock)
    now_ms = to_ms(clock.now())
    for n in range(STORES):
        config, _ = stores.put(f"s{n}", StorePut(dimensions=3))  # 64 memory partitions
        _fill(database, config, n, now_ms)
    gone, _ = stores.put("deleted-later", StorePut(dimensions=3))
    _fill(database, gone, 7, now_ms)
    stores.delete("deleted-later")  # its keys are not any live store's
    for i in range(3000):  # keys of no store: the scan walks them, counts none
        database.set(f"other:{i}", "y")
    configs = stores.all()
    assert len(configs) == STORES

    def alone(config: StoreConfig) -> Holding:
        def memories() -> int:
            with database.pipeline(transaction=False) as pipe:
                queue_count(pipe, config.keys(), now_ms)
                return counted(pipe.execute())

        return store_holding(database, config, clock, memories)

    each = [alone(config) for config in configs]
    database.config_resetstat()
    together = instance_holding(database, configs, clock)
    scans = int(database.info("commandstats")["cmdstat_scan"]["calls"])
    keyspace = int(database.dbsize())
    assert together == Holding(
        sessions=sum(h.sessions for h in each),
        messages=sum(h.messages for h in each),
        memories=sum(h.memories for h in each),
        bytes=sum(h.bytes for h in each),
    )
    assert together.sessions == sum(n % 4 for n in range(STORES)) and together.memories > 0
    # one pass over the keyspace (SCAN's COUNT is a hint: a few calls more), not one per store
    assert scans <= 2 * (keyspace // BATCH + 1) < STORES
    # a store's sessions read a few at a time come to the same; so do a cluster's reads
    monkeypatch.setattr(holding, "SESSIONS_PER_CALL", 2)
    assert instance_holding(database, configs, clock) == together
    keys = [config.keys() for config in configs]
    bases = {k.all_pattern.removesuffix("*") for k in keys}
    piped = holding._pipelined_counts(database, keys, now_ms)
    assert piped.model_copy(update={"bytes": holding._pipelined_bytes(database, bases)}) == together


def test_expired_sessions_and_memories_are_not_held(database):
    database.flushdb()
    clock = MovableClock()
    stores = Stores(database, "db", FernetCipher(Fernet.generate_key()), clock)
    config, _ = stores.put("aging", StorePut(dimensions=3))
    _fill(database, config, 3, to_ms(clock.now()))
    before = instance_holding(database, [config], clock)
    assert (before.sessions, before.memories) == (3, 4)  # s1 to s3; m0 to m4 less m0 superseded
    clock.moment += timedelta(minutes=5)
    after = instance_holding(database, [config], clock)
    assert (after.sessions, after.messages, after.memories) == (0, 0, 0)
    assert after.bytes == before.bytes > 0  # what the keys take until they go


def test_get_usage_scans_the_database_once_not_once_per_store(tenant, function_env, redis_url):
    """``GET /usage`` as the function answers it: before, each store's bytes were a scan of the
    whole database of their own (30 stores, 30 scans and more); now one scan for all."""
    client = database_client(tenant.url)
    stores = Stores(client, tenant.instance_id, FernetCipher(Fernet.generate_key()), SystemClock())
    now_ms = to_ms(SystemClock().now())
    # the tenant's database is shared with the tests before: count what these stores add
    before = invoke("get_org_usage", build("get_org_usage", tenant))[1]["now"]["sessions"]
    for n in range(30):
        config, _ = stores.put(unique("counted"), StorePut(dimensions=3))
        _fill(client, config, n, now_ms)
    server = database_client(redis_url)
    _scans(server, reset=True)
    status, body, _ = invoke("get_org_usage", build("get_org_usage", tenant))
    scans = _scans(server)
    assert status == 200 and body["unreachable"] == []
    assert body["now"]["sessions"] - before == sum(n % 4 for n in range(30))
    assert body["now"]["bytes"] > 30 * 40 * 40  # each store's 40 strings at least
    assert scans < 30, f"{scans} scans"  # fewer than one per store (a few: one per node)
    for config in stores.all():
        stores.delete(config.name)


def _scans(server: redis.Redis, reset: bool = False) -> int:
    """SCAN calls the server (every primary of a cluster) answered since its counts were
    reset; with ``reset``, reset them."""
    if is_cluster(server):
        cluster = real_client(server)
        if reset:
            cluster.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
            return 0
        found = cluster.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        per_node = list(found.values())
    else:
        if reset:
            server.config_resetstat()
            return 0
        per_node = [server.info("commandstats")]
    return sum(int(info.get("cmdstat_scan", {}).get("calls", 0)) for info in per_node)
