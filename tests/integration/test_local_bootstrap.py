"""The local stack's database choices and bootstrap: REDIS_URL, redis-server child, embedded."""

import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.providers.secrets import FernetCipher
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import bootstrap, start_database, start_embedded, start_redis_server
from tests.support.stores import sessions_of


def _round_trip(url: str, local_dir) -> None:
    api_key, origin = bootstrap(url, local_dir, None)
    control = ControlPlane(redis.Redis.from_url(url, decode_responses=True), SystemClock())
    principal = control.authenticate(api_key)
    assert principal.org_id == "local" and "generated" in origin
    instance = control.instance("local", "local")
    stores = Stores(
        redis.Redis.from_url(instance.url, decode_responses=True),
        "local",
        FernetCipher(Fernet.generate_key()),
        SystemClock(),
    )
    config, _ = stores.put("demo", StorePut())
    sessions = sessions_of(stores, config)
    sessions.append("a:b", EventsRequest(actor_id="u", events=[EventIn(role="user", content="é")]))
    assert [m.content for m in sessions.get("a:b", recent=5).messages] == ["é"]
    assert sessions.count() == 1


def test_embedded_server_runs_the_same_scripts(tmp_path):
    database = start_embedded()
    try:
        assert "embedded" in database.description
        _round_trip(database.url, tmp_path)
    finally:
        database.stop()


def test_redis_server_child_keeps_its_data_across_restarts(tmp_path):
    data = tmp_path / "redis"
    database = start_redis_server(data)
    try:
        _round_trip(database.url, tmp_path)
    finally:
        database.stop()
    again = start_redis_server(data)
    try:
        client = redis.Redis.from_url(again.url, decode_responses=True)
        assert client.hexists("kividb:mem:@stores", "demo")
    finally:
        again.stop()


def test_redis_url_wins_and_the_key_is_kept_between_starts(monkeypatch, redis_url, tmp_path):
    monkeypatch.setenv("REDIS_URL", redis_url)
    database = start_database(tmp_path)
    assert (database.url, database.description) == (redis_url, "REDIS_URL")
    first, origin = bootstrap(redis_url, tmp_path, None)
    second, origin_again = bootstrap(redis_url, tmp_path, None)
    assert first == second and "kept in" in origin_again
    chosen, origin = bootstrap(redis_url, tmp_path, "my-own-local-key-123456")
    assert chosen == "my-own-local-key-123456" and origin == "KIVIDB_API_KEY"
