"""``POST .../sessions/{session_id}/pop`` over HTTP and through the client: the newest message
back, once per Idempotency-Key, 404 without the session."""

from __future__ import annotations

import pytest

from kividb_memory import NotFoundError

ITEM = {"type": "message", "text": "hello"}
EVENTS = {"events": [{"role": "user", "content": "hi"}, {"role": "assistant", "item": ITEM}]}


def test_the_newest_message_comes_back_with_its_item_and_the_count_after(api, store):
    api.post(f"{store}/sessions/s/events", json=EVENTS)
    answer = api.post(f"{store}/sessions/s/pop")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["message_count"] == 1 and body["session_id"] == "s"
    assert body["message"]["seq"] == 2
    assert body["message"]["item"] == {"type": "message", "text": "hello"}
    messages = api.get(f"{store}/sessions/s").json()["messages"]
    assert [m["content"] for m in messages] == ["hi"]


def test_a_pop_sent_twice_with_one_key_takes_back_one_message(api, store):
    api.post(f"{store}/sessions/s/events", json=EVENTS)
    key = {"Idempotency-Key": "pop-1"}
    first = api.post(f"{store}/sessions/s/pop", headers=key)
    again = api.post(f"{store}/sessions/s/pop", headers=key)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert api.get(f"{store}/sessions/s").json()["message_count"] == 1


def test_pop_of_a_session_that_does_not_exist_is_404(api, store):
    answer = api.post(f"{store}/sessions/nobody/pop")
    assert answer.status_code == 404 and answer.json()["error"] == "session_not_found"


def test_the_client_pops_until_the_session_is_empty(memory_store):
    memory_store.add_events(
        "c", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    )
    assert memory_store.pop_message("c").message.content == "b"
    assert memory_store.pop_message("c").message.content == "a"
    assert memory_store.pop_message("c").message is None
    with pytest.raises(NotFoundError):
        memory_store.pop_message("missing")
