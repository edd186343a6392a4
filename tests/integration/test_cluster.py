"""A store on a real Redis Cluster (three primaries on loopback, started here): where its keys
live, DELETE on every primary, the control plane on a cluster, and the refusals that name a
cluster's limits. The whole suite also runs on clusters (``KIVIDB_TEST_CLUSTER=1``,
docs/testing.md); these tests run in every run."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from cryptography.fernet import Fernet
from redis.cluster import RedisCluster
from redis.crc import key_slot

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import (
    cluster_mode,
    real_client,
    redis_client,
    split_cluster_option,
)
from agent_memory.database.keys import (
    MEMORY_PARTITIONS,
    PREFIX,
    ControlKeys,
    InstanceKeys,
    actor_bucket,
)
from agent_memory.errors import (
    Conflict,
    DatabaseUnavailable,
    InstanceConflict,
    StoreNotFound,
    ValidationFailed,
)
from agent_memory.memories.models import MemoryIn, SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import Cluster, start_redis_cluster, start_redis_server
from tests.support.common import unique
from tests.support.stores import sessions_of

SESSIONS = 300
ACTORS = 300
DIM = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_redis_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()


def _stores(url: str) -> Stores:
    return Stores(redis_client(url), "c", FernetCipher(Fernet.generate_key()), SystemClock())


def _memories(url: str, config) -> Memories:
    return Memories(
        StoreDatabase(redis_client(url), redis_client(url, binary=True), config, SystemClock()),
        NoEmbedder(DIM),
        IndexCache(),
        "cluster-test",
    )


def _vector(i: int) -> list[float]:
    angle = i * 0.37
    return [float(np.cos(angle)), float(np.sin(angle)), 0.1, 0.0]


def _keys_by_node(cluster: Cluster, pattern: str) -> dict[int, set[str]]:
    """Every key matching ``pattern`` on each primary, scanned on that node alone."""
    found = {}
    for port in cluster.ports[:3]:
        node = cluster.node(port)
        found[port] = set(node.scan_iter(match=pattern, count=1000))
    return found


@pytest.fixture(scope="module")
def filled(cluster: Cluster) -> Iterator[tuple[Stores, str]]:
    """A store on the cluster with SESSIONS sessions (two messages each) and one memory for
    each of ACTORS actors."""
    stores = _stores(cluster.url)
    name = unique("spread")
    config, _ = stores.put(name, StorePut(dimensions=DIM))
    sessions = sessions_of(stores, config)
    for i in range(SESSIONS):
        events = [
            EventIn(role="user", content=f"hello {i}"),
            EventIn(role="assistant", content="hi"),
        ]
        sessions.append(f"chat-{i}", EventsRequest(actor_id=f"user-{i}", events=events))
    memories = _memories(cluster.url, config)
    for i in range(ACTORS):
        memories.add(MemoryIn(text=f"fact {i}", actor_id=f"user-{i}", vector=_vector(i)))
    yield stores, name
    with contextlib.suppress(StoreNotFound):
        stores.delete(name)


def test_one_sessions_keys_and_one_actors_keys_are_on_one_slot_and_many_spread_over_shards(
    cluster, filled
):
    stores, name = filled
    config = stores.get(name)
    keys = config.keys()
    by_node = _keys_by_node(cluster, keys.all_pattern)
    owner = {key: port for port, found in by_node.items() for key in found}
    session_nodes, actor_nodes = Counter(), Counter()
    for i in range(SESSIONS):
        session = keys.session(f"chat-{i}").all()
        assert len({key_slot(k.encode()) for k in session}) == 1
        assert all(k in owner for k in session)  # both written, on the node of that slot
        assert len({owner[k] for k in session}) == 1
        session_nodes[owner[session[0]]] += 1
    for i in range(ACTORS):
        actor = keys.actor(actor_bucket(f"user-{i}")).all()
        assert len({key_slot(k.encode()) for k in actor}) == 1
        assert len({owner[k] for k in actor if k in owner}) == 1
        assert actor[0] in owner and actor[1] not in owner  # vectors live in the records
        actor_nodes[owner[actor[0]]] += 1
    store_level = [k for k in [*keys.session_indexes(), keys.memory_actors] if k in owner]
    assert len({key_slot(k.encode()) for k in store_level}) == 1
    # The memory indexes: each partition's keys on one slot, the partitions over every shard.
    partition_nodes: Counter[int] = Counter()
    for part in keys.memory_partitions():
        written = [k for k in part.all() if k in owner]
        assert len({key_slot(k.encode()) for k in part.all()}) == 1
        assert len({owner[k] for k in written}) <= 1
        if written:
            partition_nodes[owner[written[0]]] += 1
    # 300 memories over 64 partitions leave each empty with a chance of (63/64)^300, 1 in 110
    assert MEMORY_PARTITIONS - 8 <= sum(partition_nodes.values()) <= MEMORY_PARTITIONS
    assert sorted(partition_nodes) == sorted(cluster.ports[:3])
    # 300 random ids over three equal slot ranges: about 100 each (a standard deviation is 8)
    for counts in (session_nodes, actor_nodes):
        assert sorted(counts) == sorted(cluster.ports[:3])
        assert max(counts.values()) <= 140 and min(counts.values()) >= 60, counts


def test_the_store_reads_and_searches_the_same_as_on_one_node(cluster, filled):
    stores, name = filled
    config = stores.get(name)
    sessions = sessions_of(stores, config)
    assert sessions.count() == SESSIONS
    listed = sessions.list(0, 1000).sessions
    assert sorted(s.session_id for s in listed) == sorted(f"chat-{i}" for i in range(SESSIONS))
    assert [m.content for m in sessions.get("chat-7", recent=10).messages] == ["hello 7", "hi"]
    memories = _memories(cluster.url, config)
    assert memories.count() == ACTORS
    page = memories.page(0, 1000, None, None)
    assert page.total == ACTORS and len(page.memories) == ACTORS
    found = memories.search(
        SearchRequest(
            query="fact 12", mode="semantic", actor_id="user-12", query_vector=_vector(12)
        )
    )
    assert [m.text for m in found] == ["fact 12"]
    everyone = memories.search(SearchRequest(query="fact 12", mode="keyword", limit=3))
    assert everyone[0].text == "fact 12"


def test_store_delete_removes_every_key_on_every_primary(cluster):
    stores = _stores(cluster.url)
    name = unique("gone")
    config, _ = stores.put(name, StorePut(dimensions=DIM))
    sessions = sessions_of(stores, config)
    memories = _memories(cluster.url, config)
    for i in range(60):
        sessions.append(f"s-{i}", EventsRequest(events=[EventIn(role="user", content="x")]))
        memories.add(MemoryIn(text=f"m {i}", actor_id=f"a-{i}", vector=_vector(i)))
    pattern = config.keys().all_pattern
    before = _keys_by_node(cluster, pattern)
    assert all(before.values())  # the store has keys on each of the three primaries
    stores.delete(name)
    assert _keys_by_node(cluster, pattern) == {port: set() for port in cluster.ports[:3]}
    with pytest.raises(StoreNotFound):
        stores.get(name)


def test_the_control_plane_works_on_a_cluster_and_its_marker_catches_another_node(cluster):
    control = ControlPlane(redis_client(cluster.url), SystemClock(), release_hold_seconds=0)
    org, stranger = unique("org"), unique("org")
    control.create_organization(org)
    control.create_organization(stranger)
    _, api_key = control.issue_api_key(org)
    assert control.authenticate(api_key).org_id == org
    registration = control.register_instance(org, "cluster", cluster.url, allow_unreachable=True)
    assert registration.created and registration.marked
    # another node of the same cluster is another address, but the same ownership marker
    other_node = f"redis://127.0.0.1:{cluster.ports[1]}"
    with pytest.raises(InstanceConflict, match="registered to another organization"):
        control.register_instance(stranger, "mine", other_node, allow_unreachable=True)
    with pytest.raises(InstanceConflict, match="registered to another organization"):
        control.register_instance(
            stranger, "mine", cluster.url + "?cluster=1", allow_unreachable=True
        )
    every_key = [
        str(k)
        for k in real_client(redis_client(cluster.url)).scan_iter(match=ControlKeys.instance("*"))
    ]
    assert ControlKeys.instance("cluster") in every_key
    assert {key_slot(k.encode()) for k in [ControlKeys.organizations, *every_key]} == {
        key_slot(ControlKeys.organizations.encode())
    }
    assert control.instance(org, "cluster").url == cluster.url
    control.delete_organization(org)
    assert control.register_instance(stranger, "mine", other_node, allow_unreachable=True).created
    control.delete_organization(stranger)


def test_a_cluster_url_with_a_database_number_is_a_409_naming_the_limit(cluster, tenant):
    url = cluster.url.removesuffix("/0") + "/3"
    with pytest.raises(Conflict, match="a cluster has only database 0"):
        _stores(url).all()
    with pytest.raises(Conflict, match="a cluster has only database 0"):
        tenant.control.register_instance(tenant.org_id, unique("db"), url, allow_unreachable=True)


def test_the_cluster_option_of_the_url_wins_and_a_wrong_one_is_a_503_not_a_500(cluster):
    assert cluster_mode(cluster.url) and not cluster_mode(cluster.url + "?cluster=no")
    assert split_cluster_option("rediss://u:p@h:6379/0?ssl_cert_reqs=none&cluster=1") == (
        "rediss://u:p@h:6379/0?ssl_cert_reqs=none",
        True,
    )
    assert isinstance(real_client(redis_client(cluster.url + "?cluster=1")), RedisCluster)
    with pytest.raises(ValidationFailed, match="'cluster' must be 1 or 0"):
        redis_client(cluster.url + "?cluster=maybe")
    plain = redis_client(cluster.url + "?cluster=0")  # told it is no cluster: MOVED answers
    assert isinstance(real_client(plain), redis.Redis)
    stores = Stores(plain, "c", FernetCipher(Fernet.generate_key()), SystemClock())
    names = [unique("s") for _ in range(12)]  # keys on every node: some answer MOVED
    with pytest.raises(DatabaseUnavailable, match="says cluster=0"):
        for name in names:
            sessions_of(stores, _stores(cluster.url).put(name, StorePut())[0]).count()
    for name in names:
        with contextlib.suppress(StoreNotFound):
            _stores(cluster.url).delete(name)


def test_a_cluster_option_that_contradicts_the_server_is_refused_and_nothing_changes(
    cluster, tmp_path: Path
):
    control = ControlPlane(redis_client(cluster.url), SystemClock(), release_hold_seconds=0)
    org = unique("org")
    control.create_organization(org)
    registration = control.register_instance(org, "prod", cluster.url, allow_unreachable=True)
    assert registration.marked
    marker = real_client(redis_client(cluster.url)).get(InstanceKeys.owner)
    # re-pointing the instance to its own cluster, told it is no cluster: it read as a database
    # that could not be reached, so the marker was released and the data locked out
    other_node = f"redis://127.0.0.1:{cluster.ports[1]}?cluster=0"
    with pytest.raises(ValidationFailed, match="the URL says cluster=0: remove the option"):
        control.register_instance(org, "prod", other_node, allow_unreachable=True)
    assert control.instance(org, "prod").url == cluster.url
    assert real_client(redis_client(cluster.url)).get(InstanceKeys.owner) == marker
    single = start_redis_server(tmp_path / "redis", persist=False)
    try:
        with pytest.raises(ValidationFailed, match="the database is not a cluster node"):
            control.register_instance(
                org, "single", single.url + "?cluster=1", allow_unreachable=True
            )
        with pytest.raises(DatabaseUnavailable, match="the database is not a cluster node"):
            _stores(single.url + "?cluster=1").all()  # a registration of before: 503, not 500
        assert control.register_instance(
            org, "single", single.url + "?cluster=0", allow_unreachable=True
        ).marked
    finally:
        single.stop()
        control.delete_organization(org)


def test_control_keys_of_before_the_tag_are_renamed_once_and_keep_working(tmp_path: Path):
    database = start_redis_server(tmp_path / "redis", persist=False)
    try:
        old = redis.Redis.from_url(database.url, decode_responses=True)
        old.hset("kividb:control:orgs", "acme", '{"name": "acme", "created_at": 1}')
        old.hset(
            "kividb:control:apikey:" + "ab" * 32,
            mapping={"org_id": "acme", "key_id": "key_1", "created_at": 1},
        )
        old.hset("kividb:control:org:{acme}:keys", "key_1", '["' + "ab" * 32 + '", 1]')
        old.sadd("kividb:control:org:{acme}:instances", "db1")
        old.hset("kividb:control:instance:db1", mapping={"org_id": "acme", "url": database.url})
        old.set("kividb:control:address:redis://localhost:1/0", "acme/db1")
        old.set("kividb:control:address-index", "1")
        old.set(PREFIX + "@stores-untouched", "x")  # not a control key: left as it is
        control = ControlPlane(
            redis.Redis.from_url(database.url, decode_responses=True), SystemClock()
        )
        assert control.list_organizations() == ["acme"]
        assert control.instance("acme", "db1").url == database.url
        assert [k.key_id for k in control.list_api_keys("acme")] == ["key_1"]
        assert control.instances("acme")[0].instance_id == "db1"
        assert sorted(old.scan_iter(match="kividb:control:*")) == sorted(
            [
                ControlKeys.organizations,
                ControlKeys.api_key("ab" * 32),
                ControlKeys.org_keys("acme"),
                ControlKeys.org_instances("acme"),
                ControlKeys.instance("db1"),
                ControlKeys.address("redis://localhost:1/0"),
                ControlKeys.address_index_complete,
                ControlKeys.layout,
            ]
        )
        assert old.get(PREFIX + "@stores-untouched") == "x"
        # once marked, a key written under an old name later is not looked at again
        old.hset("kividb:control:orgs", "late", "{}")
        again = ControlPlane(
            redis.Redis.from_url(database.url, decode_responses=True), SystemClock()
        )
        assert again.list_organizations() == ["acme"]
    finally:
        database.stop()
