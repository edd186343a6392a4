"""Idempotent writes over HTTP (``Idempotency-Key``): a write sent again with its key answers
what the first answered and writes nothing more, also concurrently and across a restart of the
stack; another request under a used key is 422; a bad key is 422 and writes nothing."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from local.launch import running_stack
from tests.support.stack import API_KEY

EVENTS = {
    "actor_id": "ann",
    "events": [
        {"role": "user", "content": "I moved to Lisbon"},
        {"role": "assistant", "content": "Noted."},
    ],
}


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def _messages(api: httpx.Client, store: str, session: str) -> list[str]:
    answer = api.get(f"{store}/sessions/{session}", params={"recent": 1000})
    if answer.status_code == 404:
        return []
    assert answer.status_code == 200, answer.text
    return [m["content"] for m in answer.json()["messages"]]


def test_events_sent_twice_with_one_key_are_added_once_and_answered_the_same(api, store):
    key = _key()
    first = api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key)
    again = api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert first.json() == {"session_id": "s", "added": 2, "message_count": 2}
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert _messages(api, store, "s") == ["I moved to Lisbon", "Noted."]
    # without a key, a write is a new write every time
    api.post(f"{store}/sessions/s/events", json=EVENTS)
    assert len(_messages(api, store, "s")) == 4


def test_the_same_body_with_its_keys_in_another_order_or_spacing_is_the_same_request(api, store):
    key = _key()
    first = api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key)
    reordered = (
        '{ "events": [{"content": "I moved to Lisbon", "role": "user"}, '
        '{"content": "Noted.", "role": "assistant"}], "actor_id": "ann" }'
    )
    again = api.post(f"{store}/sessions/s/events", content=reordered, headers=key)
    assert again.status_code == 200 and again.content == first.content
    assert len(_messages(api, store, "s")) == 2


@pytest.mark.parametrize(
    "other",
    [
        ("post", "/sessions/s/events", {**EVENTS, "events": EVENTS["events"][:1]}),
        ("post", "/sessions/t/events", EVENTS),  # another path
        ("post", "/memories", {"text": "likes tea", "vector": [0.1] * 1536}),  # another route
    ],
)
def test_a_used_key_with_another_request_is_422_and_writes_nothing(api, store, other):
    key = _key()
    assert api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key).status_code == 200
    method, path, body = other
    answer = api.request(method.upper(), store + path, json=body, headers=key)
    assert answer.status_code == 422
    assert answer.json()["error"] == "idempotency_key_reused"
    assert answer.json()["details"] == [
        {"field": "header.idempotency-key", "problem": "used for another request"}
    ]
    assert _messages(api, store, "s") == ["I moved to Lisbon", "Noted."]
    assert _messages(api, store, "t") == []
    memories = api.get(f"{store}/memories").json()["memories"]
    assert memories == []


def test_concurrent_sends_with_one_key_write_once_and_all_get_the_first_answer(api, store):
    key = _key()

    def send(_: int) -> httpx.Response:
        return api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    assert [a.status_code for a in answers] == [200] * 8
    assert len({a.content for a in answers}) == 1
    assert sum("idempotent-replayed" not in a.headers for a in answers) == 1
    assert _messages(api, store, "s") == ["I moved to Lisbon", "Noted."]


def test_a_memory_sent_twice_is_kept_once_and_the_second_answer_is_the_first(api, store):
    key = _key()
    body = {"text": "Ann likes green tea", "actor_id": "ann", "vector": [0.2] * 1536}
    first = api.post(f"{store}/memories", json=body, headers=key)
    again = api.post(f"{store}/memories", json=body, headers=key)
    assert first.status_code == again.status_code == 201  # not 200 duplicate: the same answer
    assert again.content == first.content
    assert [m["id"] for m in api.get(f"{store}/memories").json()["memories"]] == [
        first.json()["id"]
    ]


def test_a_patch_sent_twice_with_one_key_makes_one_version(api, store):
    memory = api.post(f"{store}/memories", json={"text": "v1", "vector": [0.3] * 1536}).json()
    key = _key()
    path = f"{store}/memories/{memory['id']}"
    first = api.patch(path, json={"text": "v2", "vector": [0.4] * 1536}, headers=key)
    again = api.patch(path, json={"text": "v2", "vector": [0.4] * 1536}, headers=key)
    assert first.status_code == 200, first.text
    assert first.status_code == again.status_code == 200 and again.content == first.content
    versions = api.get(path).json()["versions"]
    assert [v["text"] for v in versions] == ["v1"]


def test_an_error_answer_is_not_kept_so_the_same_key_runs_again(api, store, memory):
    key = _key()
    missing = store.rsplit("/", 1)[0] + "/not-yet-" + uuid.uuid4().hex[:8]
    first = api.post(f"{missing}/sessions/s/events", json=EVENTS, headers=key)
    assert first.status_code == 404
    memory.put_store("local", missing.rsplit("/", 1)[1])
    try:
        again = api.post(f"{missing}/sessions/s/events", json=EVENTS, headers=key)
        assert again.status_code == 200 and "idempotent-replayed" not in again.headers
        assert _messages(api, missing, "s") == ["I moved to Lisbon", "Noted."]
    finally:
        memory.delete_store("local", missing.rsplit("/", 1)[1])


def test_keys_are_per_store(api, store, memory):
    other_name = "other-" + uuid.uuid4().hex[:8]
    memory.put_store("local", other_name)
    other = store.rsplit("/", 1)[0] + "/" + other_name
    try:
        key = _key()
        assert api.post(f"{store}/sessions/s/events", json=EVENTS, headers=key).status_code == 200
        answer = api.post(f"{other}/sessions/s/events", json=EVENTS, headers=key)
        assert answer.status_code == 200 and "idempotent-replayed" not in answer.headers
        assert len(_messages(api, other, "s")) == 2
    finally:
        memory.delete_store("local", other_name)


@pytest.mark.parametrize(
    "bad",
    [b"", b"has space", b"tab\there", b"x" * 256, "caf\u00e9".encode("latin-1")],
    ids=["empty", "space", "tab", "256", "latin-1"],
)
def test_a_key_that_is_not_1_to_255_visible_ascii_is_422_and_writes_nothing(api, store, bad):
    request = api.build_request("POST", f"{store}/sessions/s/events", json=EVENTS)
    request.headers["Idempotency-Key"] = bad.decode("latin-1")
    answer = api.send(request)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "validation_error"
    assert answer.json()["details"][0]["field"] == "header.idempotency-key"
    assert _messages(api, store, "s") == []


def test_spaces_around_a_key_are_not_part_of_it(api, stack, store):
    import http.client
    import json
    from urllib.parse import urlsplit

    first = api.post(f"{store}/sessions/s/events", json=EVENTS, headers={"Idempotency-Key": "k-ws"})
    where = urlsplit(stack.url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    connection.request(
        "POST",
        f"{store}/sessions/s/events",
        body=json.dumps(EVENTS),
        headers={
            "Authorization": f"Bearer {stack.api_key}",
            "Content-Type": "application/json",
            "Idempotency-Key": "  k-ws\t",
        },
    )
    again = connection.getresponse()
    body = again.read()
    connection.close()
    assert again.status == 200 and again.getheader("idempotent-replayed") == "true"
    assert body == first.content


def test_a_route_without_a_body_ignores_one_for_its_key_too(api, store):
    api.post(f"{store}/sessions/s/events", json=EVENTS)
    key = {"Idempotency-Key": "pop-body"}
    first = api.post(f"{store}/sessions/s/pop", headers=key)
    again = api.post(f"{store}/sessions/s/pop", headers=key, json={"x": 1})
    assert again.status_code == 200 and again.content == first.content
    assert _messages(api, store, "s") == ["I moved to Lisbon"]


def test_a_key_of_255_visible_characters_is_taken(api, store):
    key = "".join(chr(33 + i % 94) for i in range(255))
    for _ in range(2):
        answer = api.post(
            f"{store}/sessions/s/events", json=EVENTS, headers={"Idempotency-Key": key}
        )
        assert answer.status_code == 200
    assert len(_messages(api, store, "s")) == 2


def test_a_kept_answer_outlives_a_restart_of_the_stack(redis_url, tmp_path: Path, memory, api):
    name = "restart-" + uuid.uuid4().hex[:8]
    memory.put_store("local", name)
    path = f"/instances/local/agent-memory/{name}/sessions/s/events"
    env = {
        "REDIS_URL": redis_url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path),
        "KIVIDB_WORKERS": "1",
    }
    key = _key()
    try:
        answers = []
        headers = {"Authorization": f"Bearer {API_KEY}", **key}
        for _ in range(2):  # two stacks, one after the other, on one database
            with (
                running_stack(env, timeout=120) as (url, _),
                httpx.Client(base_url=url, timeout=30, headers=headers) as c,
            ):
                answers.append(c.post(path, json=EVENTS))
        assert [a.status_code for a in answers] == [200, 200]
        assert answers[1].content == answers[0].content
        assert answers[1].headers["idempotent-replayed"] == "true"
        assert len(_messages(api, f"/instances/local/agent-memory/{name}", "s")) == 2
    finally:
        memory.delete_store("local", name)


def test_the_client_sends_a_key_of_its_own_or_the_one_given(memory_store, api):
    events = [{"role": "user", "content": "hello"}]
    for _ in range(2):
        result = memory_store.add_events("s", events, idempotency_key="turn-1")
        assert (result.added, result.message_count) == (1, 1)
    assert memory_store.add_events("s", events).message_count == 2  # a new key: a new write
    assert memory_store.add_events("s", events).message_count == 3


class _AnswerDroppingProxy:
    """A loopback proxy to the stack that forwards every request, and for the first ``drops``
    writes drops the stack's answer (closes the connection without a word), as a network cut
    after the server did the work would."""

    def __init__(self, target: str, drops: int) -> None:
        import http.server
        import threading

        self.keys: list[str | None] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                proxy.keys.append(self.headers.get("Idempotency-Key"))
                answer = httpx.post(target + self.path, content=body, headers=headers, timeout=30)
                if len(proxy.keys) <= drops:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(answer.status_code)
                for name in ("Content-Type", "Idempotent-Replayed"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_client_retries_a_write_whose_answer_was_lost_and_it_is_kept_once(stack, memory):
    from kividb_memory import MemoryClient

    name = "lost-" + uuid.uuid4().hex[:8]
    memory.put_store("local", name)
    proxy = _AnswerDroppingProxy(stack.url, drops=2)
    try:
        with MemoryClient(proxy.url, stack.api_key, max_retries=2, max_retry_wait=1) as client:
            store = client.store("local", name)
            result = store.add_events("s", [{"role": "user", "content": "once"}])
        assert (result.added, result.message_count) == (1, 1)
        assert len(proxy.keys) == 3 and len(set(proxy.keys)) == 1 and proxy.keys[0]
        kept = memory.store("local", name).get_session("s")
        assert [m.content for m in kept.messages] == ["once"]
    finally:
        proxy.close()
        memory.delete_store("local", name)
