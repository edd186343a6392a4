"""A cluster that moves data and loses a primary under traffic, through the local stack.

A Redis Cluster of three primaries with one replica each (loopback, started here) is the
stack's control database and its instance ``local``. Agents (``bench.traffic.Agent``: append,
recall, search, add memory, read session; client vectors) call without pause and never retry
while the cluster:

- moves the slot of the store's indexes, and a thousand slots more, from its primary to
  another (``redis-cli --cluster reshard``: ``ASK`` and ``MOVED`` answers, ``TRYAGAIN`` for a
  multi-key step caught half-way);
- fails that primary over to its replica on purpose (``CLUSTER FAILOVER`` on the replica);
- loses that primary (SIGKILL): its replica takes over after the node timeout (2 s).

Each time: no answer but 2xx and ``503 database_unavailable`` (with ``Retry-After``), every
acknowledged message and memory read back exactly once, in order (``check_exactly_once``), and
traffic answers 2xx again afterwards. docs/testing.md lists these with the cluster subset.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from redis.crc import key_slot

from bench.traffic import (
    CLIENT_TIMEOUT,
    Agent,
    Check,
    Ledger,
    check_exactly_once,
    httpx_transport as transport,
    statuses,
)
from kividb_memory import MemoryClient
from kividb_memory.errors import UnavailableError
from local.bootstrap import Cluster, start_redis_cluster, wait_for_cluster
from local.launch import running_stack

API_KEY = "kvm_cluster_faults_0123456789abcdefghijklmnop"
AGENTS = 6
DIMENSIONS = 8


@dataclass
class World:
    cluster: Cluster
    url: str
    log: Path

    def http(self) -> httpx.Client:
        """Raw httpx, for the agents' transport (bench/traffic.py says why)."""
        headers = {"Authorization": f"Bearer {API_KEY}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=CLIENT_TIMEOUT)

    def memory(self, *, max_retries: int = 0) -> MemoryClient:
        """The Python client; the read-back uses ``max_retries`` 20: each worker process's
        cluster client learns that a primary is gone from the first command it sends there, a
        503 with ``Retry-After: 1``, and the client sends a read again after it."""
        return MemoryClient(self.url, API_KEY, timeout=CLIENT_TIMEOUT, max_retries=max_retries)

    def alive(self) -> list[int]:
        return [p for p in self.cluster.ports if self.cluster.processes[p].poll() is None]

    def owner(self, slot: int) -> int:
        """The port of the primary serving ``slot`` now (asked of a live node)."""
        for start, end, primary, *_ in self.cluster.node(self.alive()[0]).execute_command(
            "CLUSTER", "SLOTS"
        ):
            if start <= slot <= end:
                return int(primary[1])
        raise AssertionError(f"slot {slot} is served by no primary")

    def slot_range(self, port: int) -> tuple[int, int]:
        """The first and last slot of the first range ``port`` serves."""
        for start, end, primary, *_ in self.cluster.node(port).execute_command("CLUSTER", "SLOTS"):
            if int(primary[1]) == port:
                return int(start), int(end)
        raise AssertionError(f"{port} serves no slot")

    def primaries(self) -> list[int]:
        return [
            p for p in self.alive() if self.cluster.node(p).info("replication")["role"] == "master"
        ]

    def node_id(self, port: int) -> str:
        return str(self.cluster.node(port).execute_command("CLUSTER", "MYID"))

    def replica_of(self, port: int) -> int:
        primary = self.node_id(port)
        for line in self.cluster.node(port).execute_command("CLUSTER", "NODES").splitlines():
            fields = line.split()
            if fields[3] == primary and "slave" in fields[2] and "fail" not in fields[2]:
                return int(fields[1].split("@")[0].rsplit(":", 1)[1])
        raise AssertionError(f"primary {port} has no replica")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("cluster-faults")
    cluster = start_redis_cluster(folder / "cluster", replicas=1)
    log = folder / "stack.log"
    env = {
        "REDIS_URL": cluster.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(folder / "local"),
        "KIVIDB_WORKERS": str(AGENTS + 1),
    }
    try:
        with running_stack(env, log=log, timeout=120) as (url, _):
            yield World(cluster, url, log)
    finally:
        cluster.stop()


@dataclass
class Run:
    note: str
    answers: list
    check: Check
    during: int
    recovered: bool


def under_traffic(world: World, tag: str, fault: Callable[[str], str]) -> Run:
    """A new store (client vectors) and AGENTS agents calling without pause; ``fault(store)``
    runs after 1 s, then traffic goes on until every agent had a 2xx answer after it (at most
    30 s) and 1 s more; then everything is read back."""
    store = f"/instances/local/agent-memory/{tag}"
    with world.memory() as client:
        client.put_store("local", tag, dimensions=DIMENSIONS, dedupe_threshold=1.0)
    clients = [world.http() for _ in range(AGENTS)]
    agents = [
        Agent(transport(c), store, f"{tag}-a{n}", dimensions=DIMENSIONS, extract=False, seed=n)
        for n, c in enumerate(clients)
    ]
    stop = threading.Event()

    def loop(agent: Agent) -> None:
        while not stop.is_set():
            agent.step()

    threads = [threading.Thread(target=loop, args=(a,), daemon=True) for a in agents]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        begin = time.monotonic()
        note = fault(tag)
        end = time.monotonic()
        deadline = end + 30.0
        while time.monotonic() < deadline and not all(
            any(a.ok and a.start >= end for a in list(agent.ledger.answers)) for agent in agents
        ):
            time.sleep(0.1)
        recovered = time.monotonic() < deadline
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(CLIENT_TIMEOUT + 5)
    for client in clients:
        client.close()
    ledger = Ledger(store)
    for agent in agents:
        ledger.extend(agent.ledger)
    with world.memory(max_retries=20) as client:
        # The read-back needs the cluster settled, not just the agents' last calls answered: on
        # a loaded machine (make test's two workers) a starved node can be failed over again
        # after the fault, and each read then answers 503 for longer than the retries last.
        settled = time.monotonic() + 90
        while True:
            try:
                check = check_exactly_once(client, ledger)
                break
            except UnavailableError:
                if time.monotonic() > settled:
                    raise
                time.sleep(1.0)
    answers = ledger.answers
    during = sum(1 for a in answers if a.start < end and a.end > begin)
    return Run(note, answers, check, during, recovered)


def assert_nothing_broke(run: Run) -> None:
    kinds = statuses(run.answers)
    assert set(kinds) <= {"2xx", "503 database_unavailable"}, (run.note, kinds)
    assert all(a.retry_after for a in run.answers if a.status == 503), kinds
    assert run.check.failures == 0, (run.note, run.check)
    assert run.check.messages_acknowledged > 0 and run.check.memories_acknowledged > 0
    assert run.during > 0, "no call was under way while the cluster changed"
    assert run.recovered, f"some agent had no 2xx answer after: {run.note}"


def store_slot(tag: str) -> int:
    """The slot of a store's indexes: the hash tag ``{<store>}`` (keys.StoreKeys)."""
    return key_slot(tag.encode())


def test_moving_slots_between_primaries_under_traffic_loses_nothing(world):
    def reshard(tag: str) -> str:
        slot = store_slot(tag)
        source = world.owner(slot)
        target = next(p for p in world.primaries() if p != source)
        start, end = world.slot_range(source)
        # redis-cli moves a node's lowest slots first: these, up to 1,000 past the store's, and
        # never all of them (a primary left without slots becomes a replica, and two
        # primaries could not elect a replacement for one of them in the next test)
        count = min(end - start, slot - start + 1 + 1000)
        moved = subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "reshard",
                f"127.0.0.1:{source}",
                "--cluster-from",
                world.node_id(source),
                "--cluster-to",
                world.node_id(target),
                "--cluster-slots",
                str(count),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr[-2000:]
        assert world.owner(slot) == target
        return f"{count} slots of {source} moved to {target}, the store's among them"

    run = under_traffic(world, "reshard", reshard)
    assert_nothing_broke(run)


def test_a_failover_to_the_replica_on_purpose_under_traffic_loses_nothing(world):
    def failover(tag: str) -> str:
        primary = world.owner(store_slot(tag))
        replica = world.replica_of(primary)
        world.cluster.node(replica).execute_command("CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 20
        while world.owner(store_slot(tag)) != replica:
            assert time.monotonic() < deadline, "the replica did not take over"
            time.sleep(0.05)
        return f"CLUSTER FAILOVER: {replica} took over from {primary}"

    run = under_traffic(world, "failover", failover)
    assert_nothing_broke(run)


def test_a_primary_killed_under_traffic_gives_503s_until_its_replica_takes_over(world):
    def kill(tag: str) -> str:
        primary = world.owner(store_slot(tag))
        replica = world.replica_of(primary)
        world.cluster.kill(primary)
        deadline = time.monotonic() + 30
        while True:
            try:
                if world.owner(store_slot(tag)) == replica:
                    break
            except AssertionError:
                pass  # the slot is served by no one while the replica is elected
            assert time.monotonic() < deadline, "the replica did not take over"
            time.sleep(0.05)
        wait_for_cluster(world.cluster)
        return f"primary {primary} killed (SIGKILL): {replica} took over"

    run = under_traffic(world, "kill", kill)
    assert_nothing_broke(run)
    assert statuses(run.answers)["503 database_unavailable"] > 0  # the outage was felt
