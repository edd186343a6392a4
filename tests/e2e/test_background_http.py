"""Background work end to end: the local stack, its scheduler loop and the background function,
with a store pointing at the scripted OpenAI-shaped provider (``tools.scripted_model``).

A replayed LoCoMo session is summarized while it arrives (it outgrows ``summarize_after``) and
turned into memories on its own once quiet for ``extraction_delay_seconds`` (30 s, the
smallest allowed), and recall shows both.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from kividb_memory import ConflictError, MemoryClient, NotFoundError
from tests.support.common import ROOT, needs_data, unique, wait_for
from tests.support.stack import API_KEY, model_store

SESSION = "locomo:conv-26:session-1"


@pytest.fixture
def api(open_stack) -> Iterator[MemoryClient]:
    with open_stack.memory() as client:
        yield client


@pytest.fixture
def made(api) -> Iterator[list[str]]:
    """Stores a test makes (their paths), deleted after it whatever happened."""
    paths: list[str] = []
    yield paths
    for path in paths:
        with contextlib.suppress(NotFoundError):
            api.delete_store("local", path.rsplit("/", 1)[1])


@needs_data
def test_a_replayed_conversation_is_summarized_and_extracted_on_its_own(
    api, open_stack, provider, made
):
    name = model_store(api, provider, made, summarize_after=10, keep_recent=4).rsplit("/", 1)[1]
    store = api.store("local", name)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.replay",
            "--url",
            open_stack.url,
            "--api-key",
            API_KEY,
            "--quiet",
            "--store",
            name,
            "--sessions",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    # Summarized while it arrived: never more than summarize_after + a call's worth verbatim.
    def summarized():
        view = store.get_session(SESSION, recent=1000)
        return view if view.summary and len(view.messages) <= 10 else None

    view = wait_for(summarized, 30, "the summary")
    count = view.message_count
    assert view.messages[-1].content
    assert view.extraction.status in ("waiting", "running", "idle")
    counts = api.get_store("local", name).counts
    assert counts is not None and counts.waiting_for_extraction in (0, 1)

    # Quiet for 30 s: the schedule fires and extraction reads the rest.
    def extracted():
        view = store.get_session(SESSION)
        status = view.extraction
        return view if status.unread == 0 and status.status == "idle" else None

    view = wait_for(
        extracted,
        90,
        "extraction after the quiet period",
        show=lambda: store.get_session(SESSION, recent=1),
    )
    assert time.monotonic() - started >= 30 or view.extraction.last_run_at
    assert view.extraction.last_error is None
    memories = store.list_memories(limit=100).memories
    assert memories, "the scripted model keeps first-person sentences"
    assert all(m.source is not None and m.source.session_id == SESSION for m in memories)
    assert all(m.actor_id == "locomo:conv-26" for m in memories)
    texts = [m.text for m in memories]
    assert len(texts) == len(set(texts))  # nothing kept twice
    shown = api.get_store("local", name)
    assert shown.counts is not None and shown.counts.waiting_for_extraction == 0
    assert shown.last_extraction_at is not None and shown.last_extraction_error is None

    recall = store.recall(SESSION, query="What did Caroline say about the support group?")
    assert recall.summary and recall.memories
    assert "Caroline" in recall.context
    assert len(recall.messages) + (count - len(recall.messages)) == count
    # the scripted provider's own statistics, not the API
    stats = httpx.get(provider.url.rsplit("/v1", 1)[0] + "/stats").json()
    assert stats["extract"] >= 1 and stats["summarize"] >= 1


def test_extract_now_is_queued_and_runs_without_waiting(api, provider, made):
    store = api.store("local", model_store(api, provider, made).rsplit("/", 1)[1])
    added = store.add_events(
        "s1", [{"role": "user", "content": "I adopted a cat named Miso."}], actor_id="u1"
    )
    assert added.added == 1
    queued = store.extract("s1")  # 202
    assert queued.model_dump() == {"session_id": "s1", "status": "queued"}

    def kept():
        return store.list_memories(actor_id="u1").memories or None

    (memory,) = wait_for(kept, 20, "the extracted memory")
    assert "Miso" in memory.text
    with pytest.raises(NotFoundError) as missing:
        store.extract("nope")
    assert missing.value.code == "session_not_found"


def test_extract_on_a_store_without_a_model_is_a_409(api, made):
    name = unique("plain")
    made.append(f"/instances/local/agent-memory/{name}")
    api.put_store("local", name)
    store = api.store("local", name)
    store.add_events("s", [{"role": "user", "content": "hi"}])
    with pytest.raises(ConflictError) as refused:
        store.extract("s")
    assert refused.value.status == 409 and "no language model" in refused.value.message
    view = store.get_session("s")
    assert view.extraction.status == "idle" and view.extraction.due_at is None
