"""Each function's lambda_handler, called with its events/*.json sample (as `sam local invoke -e`
would), against a real Redis server. Variations come from one small builder."""

import pytest

from agent_memory.background.scheduler import ExtractionTarget, LocalScheduler, schedule_name
from agent_memory.clock import SystemClock
from local.server import LambdaContext
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.handlers import API, HANDLERS, build, invoke, sample


@pytest.fixture
def store(tenant, function_env):
    name = unique("store")
    status, _, _ = invoke("put_store", build("put_store", tenant, name))
    assert status == 201
    yield name
    invoke("delete_store", build("delete_store", tenant, name))


def test_samples_drive_a_whole_conversation(tenant, store):
    status, body, _ = invoke("add_events", build("add_events", tenant, store))
    assert status == 200 and body == {"session_id": "demo-session", "added": 2, "message_count": 2}
    status, body, _ = invoke("get_session", build("get_session", tenant, store))
    assert status == 200 and body["actor_id"] == "user-7"
    assert body["messages"][0]["content"] == "My order ORD-2291 never arrived."
    status, body, _ = invoke("list_sessions", build("list_sessions", tenant, store))
    assert [s["session_id"] for s in body["sessions"]] == ["demo-session"]
    status, body, _ = invoke("recall", build("recall", tenant, store))
    assert status == 200 and "## Recent messages" in body["context"]
    status, body, _ = invoke("get_store", build("get_store", tenant, store))
    assert body["counts"] == {"sessions": 1, "memories": 0, "waiting_for_extraction": 0}
    assert body["custom_types"][0]["name"] == "order_issue"
    status, body, _ = invoke("list_instance_stores", build("list_instance_stores", tenant))
    assert [s["name"] for s in body["stores"]] == [store]
    status, body, _ = invoke("list_stores", build("list_stores", tenant))
    assert [(s["name"], s["instance_id"]) for s in body["stores"]] == [(store, tenant.instance_id)]
    status, body, _ = invoke("pop_message", build("pop_message", tenant, store))
    assert status == 200 and body["message_count"] == 1
    assert body["message"]["seq"] == 2 and body["message"]["role"] == "assistant"
    status, body, _ = invoke("delete_session", build("delete_session", tenant, store))
    assert status == 204 and body is None
    status, body, _ = invoke("get_session", build("get_session", tenant, store))
    assert status == 404 and body["error"] == "session_not_found"


# What a 404 store_not_found says on each route: the next step where there is one.
MISSING_STORE = {
    "create it with PUT first": {
        "add_events",
        "add_memory",
        "import_session",
        "import_memories",
        "import_profiles",
        "put_keyed_memory",
    },
    "nothing was deleted": {
        "delete_store",
        "delete_session",
        "delete_memory",
        "forget_actor",
        "delete_keyed_memory",
    },
    "": {
        "get_store",
        "list_sessions",
        "get_session",
        "extract_session",
        "pop_message",
        "recall",
        "list_memories",
        "search_memories",
        "get_memory",
        "update_memory",
        "export_sessions",
        "export_session",
        "export_memories",
        "get_keyed_memory",
        "search_keyed_memories",
        "list_keyed_namespaces",
        "get_usage",
        "rotate_webhook_secret",
        "list_webhook_deliveries",
        "get_profile",
        "update_profile",
        "get_profile_history",
        "export_profiles",
        "consolidate_actor",
        "list_consolidations",
        "get_consolidation",
        "apply_consolidation",
        "discard_consolidation",
        "revert_consolidation",
        "restore_memory",
    },
}


@pytest.mark.parametrize(
    ("name", "step"),
    [(name, step) for step, names in MISSING_STORE.items() for name in sorted(names)],
)
def test_a_missing_stores_404_says_the_next_step_of_its_route(tenant, function_env, name, step):
    missing = unique("missing")
    status, body, _ = invoke(name, build(name, tenant, missing))
    assert (status, body["error"]) == (404, "store_not_found")
    said = f"Store '{missing}' does not exist on this instance"
    assert body["message"] == (f"{said}; {step}." if step else f"{said}.")


def test_every_route_of_a_store_is_in_the_missing_store_table():
    routes = {r.function.handler.split(".")[0] for r in API.routes if "{store}" in r.path}
    assert routes - {"put_store"} == set().union(*MISSING_STORE.values())


def test_the_authorizer_sample_names_the_keys_organization(tenant, function_env):
    event = sample("authorizer")
    event["headers"]["authorization"] = f"Bearer {tenant.api_key}"
    answer = API.authorizer.load()(event, LambdaContext("authorizer"))
    assert answer == {
        "isAuthorized": True,
        "context": {"org_id": tenant.org_id, "key_id": tenant.key_id},
    }
    event["headers"]["authorization"] = "Bearer kvm_not_a_key_at_all_0000000000"
    answer = API.authorizer.load()(event, LambdaContext("authorizer"))
    assert answer["context"]["error"] == "unauthorized" and "org_id" not in answer["context"]
    del event["headers"]["authorization"]
    answer = API.authorizer.load()(event, LambdaContext("authorizer"))
    assert answer["context"]["error"] == "unauthorized"


def test_a_warm_authorizer_checks_a_key_it_has_seen_in_one_round_trip_and_refuses_it_revoked(
    tenant, function_env, monkeypatch
):
    import redis.connection

    event = sample("authorizer")
    event["headers"]["authorization"] = f"Bearer {tenant.api_key}"
    authorizer = API.authorizer.load()
    assert "org_id" in authorizer(event, LambdaContext("authorizer"))["context"]  # seen now
    sent = []
    real = redis.connection.AbstractConnection.send_packed_command
    monkeypatch.setattr(
        redis.connection.AbstractConnection,
        "send_packed_command",
        lambda self, *a, **k: sent.append(1) or real(self, *a, **k),
    )
    answer = authorizer(event, LambdaContext("authorizer"))
    assert answer["context"] == {"org_id": tenant.org_id, "key_id": tenant.key_id}
    assert len(sent) == 1
    usage_before = _usage(tenant)
    tenant.control.revoke_api_key(tenant.org_id, tenant.key_id)
    answer = authorizer(event, LambdaContext("authorizer"))
    assert answer["context"]["error"] == "unauthorized" and "org_id" not in answer["context"]
    assert _usage(tenant) == usage_before  # a revoked key's request is not counted


def _usage(tenant):
    from agent_memory.database.keys import ControlKeys

    client = tenant.control._redis
    days = sorted(client.scan_iter(match=ControlKeys.usage(tenant.org_id, "*")))
    return [client.hgetall(day) for day in days]


# The MCP function answers the MCP protocol itself for anyone and refuses an unauthenticated
# caller's tool calls as tool errors (docs/mcp.md, "Errors"; tests/unit/test_mcp_remote.py).
# The console's function serves its page and files without the authorizer and reads no data
# (docs/console.md; tests/e2e/test_console_handler.py).
@pytest.mark.parametrize("name", sorted(set(HANDLERS) - {"mcp_handler", "console"}))
def test_every_handler_refuses_an_unauthenticated_caller(tenant, function_env, name):
    event = build(name, tenant)
    event["requestContext"]["authorizer"]["lambda"] = {"error": "unauthorized", "message": "no"}
    status, body, _ = invoke(name, event)
    assert status == 401 and body == {"error": "unauthorized", "message": "no"}


def test_a_lone_surrogate_is_a_422_and_stores_nothing(tenant, store):
    bad = '{"events": [{"role": "user", "content": "\\ud83d"}]}'
    status, body, _ = invoke("add_events", build("add_events", tenant, store, body=bad))
    assert status == 422 and body["error"] == "validation_error"
    status, body, _ = invoke("list_sessions", build("list_sessions", tenant, store))
    assert body["sessions"] == []


def test_a_bad_id_in_a_path_is_a_422_saying_the_rule_in_words(tenant, store):
    """Issue 32: the problem said the raw regular expression."""
    status, body, _ = invoke("get_session", build("get_session", tenant, store, session="a!b"))
    assert status == 422
    assert body["details"] == [
        {
            "field": "path.session_id",
            "problem": "must be 1 to 256 characters: letters, digits, '.', '_', ':', '@' and "
            "'-' (not '.' or '..' alone)",
        }
    ]
    event = build("get_memory", tenant, store)
    event["rawPath"] = event["requestContext"]["http"]["path"] = event["rawPath"].replace(
        "mem_0123456789abcdef0123", "mem_XYZ"
    )
    status, body, _ = invoke("get_memory", event)
    assert status == 422
    assert body["details"][0]["problem"] == (
        "must be a memory id: 'mem_' and 20 lower-case hexadecimal digits"
    )


def test_database_outage_is_a_503_with_retry_after(tenant, store, monkeypatch):
    tenant.control.register_instance(
        tenant.org_id, tenant.instance_id, "redis://127.0.0.1:1/0", allow_unreachable=True
    )
    status, body, headers = invoke("get_store", build("get_store", tenant, store))
    assert status == 503 and body["error"] == "database_unavailable"
    assert headers["Retry-After"] == "1"
    tenant.control.register_instance(
        tenant.org_id, tenant.instance_id, tenant.url, allow_unreachable=True
    )


def test_the_background_sample_event_runs_and_reports(tenant, store, monkeypatch):
    monkeypatch.setenv("KIVIDB_SCHEDULER", "local")
    background = API.background.load()
    event = {**sample("background"), "instance_id": tenant.instance_id, "store": store}
    assert background(event, LambdaContext("background"))["outcome"] == "gone"  # no session
    invoke("add_events", build("add_events", tenant, store))
    answer = background(event, LambdaContext("background"))
    assert answer["outcome"] == "no_model" and answer["model_calls"] == 0
    gone = {**event, "store": unique("nostore")}
    assert background(gone, LambdaContext("background"))["outcome"] == "gone"
    assert background({"kind": "other"}, LambdaContext("background")) == {"outcome": "invalid"}


def test_extract_now_needs_a_language_model_and_a_session(tenant, store, monkeypatch, client):
    monkeypatch.setenv("KIVIDB_SCHEDULER", "local")
    queued = LocalScheduler(client, SystemClock())
    name = schedule_name(ExtractionTarget(tenant.instance_id, store, "demo-session"))

    def queued_for_the_session():
        return [n for n in queued.pending() if n.startswith(name)]

    invoke("add_events", build("add_events", tenant, store))  # a session, on a store w/o model
    status, body, _ = invoke("extract_session", build("extract_session", tenant, store))
    assert status == 409 and body == {
        "error": "conflict",
        "message": "This store has no language model (llm_provider is 'none'), so it extracts "
        "nothing; set llm_provider and llm_model (and llm_api_key or llm_base_url, as the "
        "provider needs) on the store first.",
    }
    assert queued_for_the_session() == []  # nothing queued, nothing marked
    status, body, _ = invoke("get_session", build("get_session", tenant, store))
    assert body["extraction"] == {
        "status": "idle",
        "due_at": None,
        "last_run_at": None,
        "last_error": None,
        "unread": 2,
    }
    invoke("delete_session", build("delete_session", tenant, store))
    model = {"llm_provider": "openai", "llm_model": "gpt-4o-mini", "llm_api_key": "sk-test"}
    status, _, _ = invoke("put_store", build("put_store", tenant, store, body=model))
    assert status == 200
    status, body, _ = invoke("extract_session", build("extract_session", tenant, store))
    assert status == 404 and body == {
        "error": "session_not_found",
        "message": "Session 'demo-session' does not exist or has expired.",
    }
    assert queued_for_the_session() == []
    invoke("add_events", build("add_events", tenant, store))
    status, body, _ = invoke("extract_session", build("extract_session", tenant, store))
    assert status == 202 and body == {"session_id": "demo-session", "status": "queued"}
    assert len(queued_for_the_session()) == 2  # the append's schedule and the run now
    status, body, _ = invoke("get_session", build("get_session", tenant, store))
    assert body["extraction"]["status"] == "waiting" and body["extraction"]["unread"] == 2
    assert body["extraction"]["due_at"] is not None  # the append armed the quiet-period run


def test_an_idempotent_write_looks_its_store_up_once(tenant, store, monkeypatch):
    """The idempotency middleware and the route share the request's store handle: one
    instance and one store lookup, not two (``Runtime.begin_request``)."""
    from agent_memory.stores.registry import Stores

    looked_up: list[str] = []
    get = Stores.get

    def counted(self, name):
        looked_up.append(name)
        return get(self, name)

    monkeypatch.setattr(Stores, "get", counted)
    for _ in range(2):  # the second is answered from the record
        event = build("add_events", tenant, store)
        event["headers"]["idempotency-key"] = "once-per-request"
        status, _, headers = invoke("add_events", event)
        assert status == 200
    assert looked_up == [store, store]
    assert headers["Idempotent-Replayed"] == "true"


def test_a_keyed_append_whose_answer_was_lost_is_not_done_again(tenant, store):
    """A 503 after the append was done frees the middleware's record (the database went away
    between the write and the answer); the append's own once record, written in the same
    script, makes the retry answer the first append instead of adding the messages again."""
    event = build("add_events", tenant, store)
    event["headers"]["idempotency-key"] = "lost-answer"
    status, first, _ = invoke("add_events", event)
    assert status == 200 and first["message_count"] == 2
    database = database_client(tenant.url)
    records = list(database.scan_iter(match=f"kividb:mem:{store}:*:idempotency:*"))
    assert len(records) == 1
    database.delete(*records)  # as the middleware does after a 503
    status, again, headers = invoke("add_events", event)
    assert status == 200 and again == first and "Idempotent-Replayed" not in headers
    status, session, _ = invoke("get_session", build("get_session", tenant, store))
    assert session["message_count"] == 2
