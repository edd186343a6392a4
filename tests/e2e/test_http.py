"""The API over HTTP through the local stack: the README's session, every error status with the
JSON error shape, concurrency, text and ids.

Plain httpx, not the Python client: these tests check the wire itself (exact statuses such as
201 against 200, headers, raw bodies, wrong methods and paths, encoded ids)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from tests.support.common import unique
from tests.support.databases import database_client, on_database
from tests.support.http import BASE, assert_error


def test_readme_session_create_add_recall(api, store):
    response = api.post(
        f"{store}/sessions/chat-1/events",
        json={
            "actor_id": "user-7",
            "events": [
                {"role": "user", "content": "I deploy to eu-west-1."},
                {"role": "assistant", "content": "Noted: eu-west-1."},
            ],
        },
    )
    assert response.json() == {"session_id": "chat-1", "added": 2, "message_count": 2}
    recalled = api.post(f"{store}/recall", json={"session_id": "chat-1", "query": "region?"}).json()
    assert [m["content"] for m in recalled["messages"]] == [
        "I deploy to eu-west-1.",
        "Noted: eu-west-1.",
    ]
    assert recalled["actor_id"] == "user-7" and recalled["memories"] == []
    assert 'user: "I deploy to eu-west-1."' in recalled["context"]
    listed = api.get(f"{store}/sessions").json()
    assert [s["session_id"] for s in listed["sessions"]] == ["chat-1"]
    shown = api.get(f"{store}/sessions/chat-1").json()
    assert listed["sessions"][0]["extraction"] == shown["extraction"]
    assert shown["extraction"]["status"] == "idle" and shown["extraction"]["unread"] == 2
    assert api.get(store).json()["counts"]["sessions"] == 1


def test_recall_before_the_first_turn(api, store):
    body = api.post(f"{store}/recall", json={"session_id": "brand-new", "actor_id": "u"}).json()
    assert body["messages"] == [] and body["summary"] is None and body["memories"] == []
    assert "new conversation" in body["context"]


ROUTES = [
    ("GET", "/agent-memory"),
    ("GET", BASE),
    ("PUT", f"{BASE}/s"),
    ("GET", f"{BASE}/s"),
    ("DELETE", f"{BASE}/s"),
    ("POST", f"{BASE}/s/sessions/x/events"),
    ("GET", f"{BASE}/s/sessions"),
    ("GET", f"{BASE}/s/sessions/x"),
    ("DELETE", f"{BASE}/s/sessions/x"),
    ("POST", f"{BASE}/s/recall"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("key", [None, "kvm_wrong_key_wrong_key_wrong_key", "Basic abc"])
def test_every_route_answers_401_without_a_valid_key(stack, method, path, key):
    headers = {} if key is None else {"Authorization": key if " " in key else f"Bearer {key}"}
    response = httpx.request(method, stack.url + path, headers=headers, json={})
    assert_error(response, 401, "unauthorized")


def test_another_organizations_instance_is_a_404_like_a_missing_one(stack, api):
    control = ControlPlane(
        database_client(stack.redis_url),
        SystemClock(),
        release_hold_seconds=0,
    )
    other, instance = unique("org"), unique("db")
    control.create_organization(other)
    # database 0 is the stack's own (organization local): another organization cannot have it
    control.register_instance(
        other, instance, on_database(stack.redis_url, 2), allow_unreachable=True
    )
    try:
        theirs = assert_error(
            api.get(f"/instances/{instance}/agent-memory"), 404, "instance_not_found"
        )
        missing = assert_error(api.get("/instances/nope/agent-memory"), 404, "instance_not_found")
        assert theirs["message"].replace(instance, "X") == missing["message"].replace("nope", "X")
    finally:
        control.delete_organization(other)


def test_unknown_store_and_session_are_404(api, store):
    assert_error(
        api.post(f"{BASE}/no-such-store/recall", json={"session_id": "s"}), 404, "store_not_found"
    )
    assert_error(api.get(f"{store}/sessions/never"), 404, "session_not_found")
    assert_error(api.delete(f"{store}/sessions/never"), 404, "session_not_found")


def test_unknown_route_is_api_gateways_404(api):
    response = api.get("/nowhere")
    assert response.status_code == 404 and response.json() == {"message": "Not Found"}


def test_another_actor_is_a_409_and_adds_nothing(api, store):
    api.post(
        f"{store}/sessions/s/events",
        json={"actor_id": "alice", "events": [{"role": "user", "content": "hi"}]},
    )
    response = api.post(
        f"{store}/sessions/s/events",
        json={"actor_id": "bob", "events": [{"role": "user", "content": "mine now"}]},
    )
    assert_error(response, 409, "actor_mismatch")
    assert api.get(f"{store}/sessions/s").json()["message_count"] == 1


def test_size_limits_are_413_and_422_and_store_nothing(api, store):
    big = {"events": [{"role": "user", "content": "x" * 30_000}] * 40}  # > 1 MiB
    assert_error(api.post(f"{store}/sessions/s/events", json=big), 413, "payload_too_large")
    many = {"events": [{"role": "user", "content": "x"}] * 101}
    assert_error(api.post(f"{store}/sessions/s/events", json=many), 413, "payload_too_large")
    long = {"events": [{"role": "user", "content": "x" * 32_001}]}
    body = assert_error(api.post(f"{store}/sessions/s/events", json=long), 422, "validation_error")
    assert body["details"][0]["field"] == "events.0.content"
    assert api.get(f"{store}/sessions").json()["sessions"] == []


@pytest.mark.parametrize(
    "raw",
    [
        '{"events": [{"role": "user", "content": "\\ud83d"}]}',
        '{"events": [{"role": "user", "content": "ok \\udc00 no"}]}',
        '{"events": [{"role": "user", "content": "x"}], }',
        '{"events": [{"role": "robot", "content": "x"}]}',
        '{"events": "not a list"}',
        "not json",
        "",
    ],
)
def test_malformed_bodies_are_422_never_500_and_store_nothing(api, store, raw):
    response = api.post(
        f"{store}/sessions/s/events",
        content=raw.encode(),
        headers={"content-type": "application/json"},
    )
    assert_error(response, 422, "validation_error")
    assert api.get(f"{store}/sessions").json()["sessions"] == []


def test_invalid_settings_are_422_with_details_and_change_nothing(api, store):
    body = assert_error(api.put(store, json={"keep_recent": 40}), 422, "validation_error")
    assert "keep_recent" in body["details"][0]["problem"]
    body = assert_error(
        api.put(store, json={"extraction_delay_seconds": 10}), 422, "validation_error"
    )
    assert body["details"][0]["field"] == "extraction_delay_seconds"
    body = assert_error(
        api.put(
            store, json={"custom_types": [{"name": f"t{i}", "description": "d"} for i in range(4)]}
        ),
        422,
        "validation_error",
    )
    current = api.get(store).json()
    assert (current["keep_recent"], current["extraction_delay_seconds"]) == (12, 300)


def test_provider_keys_are_write_only(api, store):
    secret = "sk-test-" + unique("secret")
    response = api.put(
        store, json={"llm_provider": "openai", "llm_model": "gpt-4o-mini", "llm_api_key": secret}
    )
    assert response.status_code == 200 and secret not in response.text
    assert response.json()["has_llm_api_key"] is True
    assert secret not in api.get(store).text and secret not in api.get(BASE).text


def test_eight_concurrent_writers_of_25_over_http(stack, store):
    errors: list[str] = []

    def writer(n: int) -> None:
        with stack.client() as client:
            for i in range(25):
                r = client.post(
                    f"{store}/sessions/busy/events",
                    json={"events": [{"role": "user", "content": f"w{n}-{i:02d}"}]},
                )
                if r.status_code != 200:
                    errors.append(r.text)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with stack.client() as client:
        view = client.get(f"{store}/sessions/busy", params={"recent": 1000}).json()
    assert view["message_count"] == 200
    contents = [m["content"] for m in view["messages"]]
    assert len(set(contents)) == 200 and [m["seq"] for m in view["messages"]] == list(range(1, 201))
    for n in range(8):
        assert [c for c in contents if c.startswith(f"w{n}-")] == [
            f"w{n}-{i:02d}" for i in range(25)
        ]


TEXTS = ["👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽", "cafe\u0301 vs café", "中文 日本語 한국어", "Ω≈ç√∫ \u200b zero-width"]


def test_text_reads_back_byte_for_byte(api, store):
    events = [{"role": "user", "content": t, "name": t[:5]} for t in TEXTS]
    api.post(f"{store}/sessions/text/events", json={"events": events})
    response = api.get(f"{store}/sessions/text")
    messages = response.json()["messages"]
    assert [m["content"].encode() for m in messages] == [t.encode() for t in TEXTS]
    assert [m["name"] for m in messages] == [t[:5] for t in TEXTS]
    assert "👩‍👩‍👧‍👦".encode() in response.content  # sent as UTF-8, not as \u escapes


@pytest.mark.parametrize(
    "ids", [("team:a_b", "team_a:b", "team:a:b"), ("u@example.com", "u@example:com", "u.1@x")]
)
def test_lookalike_ids_over_http_do_not_collide(api, store, ids):
    for session_id in ids:
        event = {"role": "user", "content": session_id}
        api.post(
            f"{store}/sessions/{session_id}/events",
            json={"actor_id": session_id, "events": [event]},
        )
    for session_id in ids:
        view = api.get(f"{store}/sessions/{session_id}").json()
        assert view["actor_id"] == session_id
        assert [m["content"] for m in view["messages"]] == [session_id]


def test_percent_encoded_ids_mean_the_same_session(api, store):
    api.post(f"{store}/sessions/a@b:c/events", json={"events": [{"role": "user", "content": "x"}]})
    assert api.get(f"{store}/sessions/a%40b%3Ac").json()["session_id"] == "a@b:c"


def test_bad_ids_and_queries_are_422(api, store):
    assert_error(api.get(f"{store}/sessions/has space"), 422, "validation_error")
    assert_error(api.put(f"{BASE}/{'x' * 65}", json={}), 422, "validation_error")
    assert_error(api.get(f"{store}/sessions", params={"limit": 0}), 422, "validation_error")
    assert_error(api.get(f"{store}/sessions/s", params={"recent": 1001}), 422, "validation_error")
    assert_error(
        api.post(f"{store}/recall", json={"session_id": "s", "limit": 500}), 422, "validation_error"
    )


def test_delete_store_forgets_everything(api):
    name = unique("store")
    api.put(f"{BASE}/{name}", json={})
    api.post(
        f"{BASE}/{name}/sessions/s/events", json={"events": [{"role": "user", "content": "x"}]}
    )
    assert api.delete(f"{BASE}/{name}").status_code == 204
    assert_error(api.get(f"{BASE}/{name}"), 404, "store_not_found")
    assert api.put(f"{BASE}/{name}", json={}).status_code == 201
    assert api.get(f"{BASE}/{name}/sessions").json()["sessions"] == []
    api.delete(f"{BASE}/{name}")


def test_form_encoded_curl_bodies_are_read_as_json(stack, store):
    response = httpx.post(
        stack.url + f"{store}/recall",
        headers={
            "Authorization": f"Bearer {stack.api_key}",
            "Content-Type": "application/x-www-form-urlencoded",  # what curl -d sends
        },
        content=json.dumps({"session_id": "s"}),
    )
    assert response.status_code == 200
