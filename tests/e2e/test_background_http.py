"""Background work end to end: the local stack, its scheduler loop and the background function,
with a store pointing at the scripted OpenAI-shaped provider (``tools.scripted_model``).

A replayed LoCoMo session is summarized while it arrives (it outgrows ``summarize_after``) and
turned into memories on its own once quiet for ``extraction_delay_seconds`` (30 s, the
smallest allowed), and recall shows both.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ROOT, needs_data, unique
from tests.e2e.conftest import API_KEY, model_store

BASE = "/instances/local/agent-memory"
SESSION = "locomo:conv-26:session-1"


@pytest.fixture
def api(open_stack) -> Iterator[httpx.Client]:
    with open_stack.client() as client:
        yield client


@pytest.fixture
def made(api) -> Iterator[list[str]]:
    """Stores a test makes, deleted after it whatever happened."""
    paths: list[str] = []
    yield paths
    for path in paths:
        api.delete(path)


def wait_for(check, timeout: float, what: str, show=None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {show() if show else ''}")
        time.sleep(0.25)


@needs_data
def test_a_replayed_conversation_is_summarized_and_extracted_on_its_own(
    api, open_stack, provider, made
):
    store = model_store(api, provider, made, summarize_after=10, keep_recent=4)
    name = store.rsplit("/", 1)[1]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tools.replay", "--url", open_stack.url, "--api-key", API_KEY,
         "--quiet", "--store", name, "--sessions", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    session_url = f"{store}/sessions/{SESSION}"

    # Summarized while it arrived: never more than summarize_after + a call's worth verbatim.
    def summarized():
        view = api.get(session_url, params={"recent": 1000}).json()
        return view if view["summary"] and len(view["messages"]) <= 10 else None

    view = wait_for(summarized, 30, "the summary")
    count = view["message_count"]
    assert view["messages"][-1]["content"]
    assert view["extraction"]["status"] in ("waiting", "running", "idle")
    assert api.get(store).json()["counts"]["waiting_for_extraction"] in (0, 1)

    # Quiet for 30 s: the schedule fires and extraction reads the rest.
    def extracted():
        view = api.get(session_url).json()
        status = view["extraction"]
        return view if status["unread"] == 0 and status["status"] == "idle" else None

    view = wait_for(
        extracted, 90, "extraction after the quiet period",
        lambda: api.get(session_url, params={"recent": 1}).json(),
    )  # fmt: skip
    assert time.monotonic() - started >= 30 or view["extraction"]["last_run_at"]
    assert view["extraction"]["last_error"] is None
    memories = api.get(f"{store}/memories", params={"limit": 100}).json()["memories"]
    assert memories, "the scripted model keeps first-person sentences"
    assert all(m["source"] == {"session_id": SESSION} for m in memories)
    assert all(m["actor_id"] == "locomo:conv-26" for m in memories)
    texts = [m["text"] for m in memories]
    assert len(texts) == len(set(texts))  # nothing kept twice
    shown = api.get(store).json()
    assert shown["counts"]["waiting_for_extraction"] == 0
    assert shown["last_extraction_at"] is not None and shown["last_extraction_error"] is None

    recall = api.post(
        f"{store}/recall",
        json={"session_id": SESSION, "query": "What did Caroline say about the support group?"},
    ).json()
    assert recall["summary"] and recall["memories"]
    assert "Caroline" in recall["context"]
    assert len(recall["messages"]) + (count - len(recall["messages"])) == count
    stats = httpx.get(provider.url.rsplit("/v1", 1)[0] + "/stats").json()
    assert stats["extract"] >= 1 and stats["summarize"] >= 1
    api.delete(store)


def test_extract_now_answers_202_and_runs_without_waiting(api, provider, made):
    store = model_store(api, provider, made)
    events = {
        "actor_id": "u1",
        "events": [{"role": "user", "content": "I adopted a cat named Miso."}],
    }
    assert api.post(f"{store}/sessions/s1/events", json=events).status_code == 200
    answer = api.post(f"{store}/sessions/s1/extract")
    assert answer.status_code == 202
    assert answer.json() == {"session_id": "s1", "status": "queued"}

    def kept():
        found = api.get(f"{store}/memories", params={"actor_id": "u1"}).json()["memories"]
        return found or None

    (memory,) = wait_for(kept, 20, "the extracted memory")
    assert "Miso" in memory["text"]
    assert api.post(f"{store}/sessions/nope/extract").status_code == 404
    api.delete(store)


def test_extract_on_a_store_without_a_model_is_a_409(api):
    store = f"{BASE}/{unique('plain')}"
    assert api.put(store, json={}).status_code == 201
    api.post(f"{store}/sessions/s/events", json={"events": [{"role": "user", "content": "hi"}]})
    answer = api.post(f"{store}/sessions/s/extract")
    assert answer.status_code == 409
    assert "no language model" in answer.json()["message"]
    view = api.get(f"{store}/sessions/s").json()
    assert view["extraction"]["status"] == "idle" and view["extraction"]["due_at"] is None
    api.delete(store)
