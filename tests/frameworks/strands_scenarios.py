"""``KiviDBMemoryStore`` with a Strands ``Agent`` and ``MemoryManager``, the model being
Strands' own test double (``MockedModelProvider``): what one session adds, a second session is
given; a batch of messages sent again is kept once.

Run by ``tests/e2e/test_framework_suites.py`` in the Strands virtualenv (``.venv-strands``:
Strands pins mcp<2.2), inside the strands-agents source distribution (its working directory),
next to Strands' own test and with ``kividb_strands_plugin``, on the store that
``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` name (one with
the scripted embedding provider). Not a ``test_`` file: the main suite does not collect it."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.memory import AddMessagesContext, MemoryManager

from kividb_memory import MemoryClient
from kividb_memory.integrations.strands import KiviDBMemoryStore


def _mocked_model_provider() -> type:
    """Strands' own ``MockedModelProvider`` (its tests' fixture), loaded from its file in the
    source distribution this run works in."""
    path = Path.cwd() / "tests/fixtures/mocked_model_provider.py"
    spec = importlib.util.spec_from_file_location("strands_mocked_model_provider", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MockedModelProvider  # type: ignore[no-any-return]


def _texts(messages: list[Any]) -> str:
    return " ".join(b["text"] for m in messages for b in m["content"] if "text" in b)


@pytest.fixture
def scripted_store():
    with MemoryClient() as client:
        yield client.store(os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"])


def test_what_one_session_adds_the_next_session_is_given(scripted_store):
    model_class = _mocked_model_provider()
    first_model = model_class(
        [
            {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "t1",
                            "name": "add_memory",
                            "input": {"entries": ["Lee's favourite city is Lisbon"]},
                        }
                    }
                ],
            },
            {"role": "assistant", "content": [{"text": "I will remember that."}]},
        ]
    )
    first = Agent(
        model=first_model,
        callback_handler=None,
        plugins=[
            MemoryManager(
                stores=[KiviDBMemoryStore(actor_id="lee", store=scripted_store)],
                add_tool_config=True,
            )
        ],
    )
    first("My favourite city is Lisbon.")
    kept = scripted_store.list_memories(actor_id="lee").memories
    assert [m.text for m in kept] == ["Lee's favourite city is Lisbon"]

    second_model = model_class([{"role": "assistant", "content": [{"text": "Lisbon."}]}])
    seen: list[list[Any]] = []
    stream = second_model.stream

    def record(messages, *args, **kwargs):
        seen.append([dict(m) for m in messages])
        return stream(messages, *args, **kwargs)

    second_model.stream = record
    second = Agent(
        model=second_model,
        callback_handler=None,
        plugins=[MemoryManager(stores=[KiviDBMemoryStore(actor_id="lee", store=scripted_store)])],
    )
    second("Which city do I like best?")
    assert "Lee's favourite city is Lisbon" in _texts(seen[0])  # injected for the model
    assert "Lee's favourite city is Lisbon" not in _texts(second.messages)  # not in history


class _AnswerLost:
    """A store client whose first ``add_events`` is done and then reported failed (its answer
    lost on the way back), as a time-out after the server kept the messages would be."""

    def __init__(self, store: Any) -> None:
        self.store, self.failed = store, False

    def add_events(self, *args: Any, **kwargs: Any) -> Any:
        done = self.store.add_events(*args, **kwargs)
        if not self.failed:
            self.failed = True
            raise TimeoutError("the answer was lost")
        return done


def test_a_batch_whose_answer_was_lost_is_sent_again_and_kept_once(scripted_store):
    store = KiviDBMemoryStore(
        actor_id="bo", store=_AnswerLost(scripted_store), session_id="bo-chat"
    )
    batch = [
        {"role": "user", "content": [{"text": "I moved to Porto."}]},
        {"role": "assistant", "content": [{"text": "Noted."}]},
    ]
    context = AddMessagesContext(sequence_numbers=[0, 1])

    async def go() -> None:
        with pytest.raises(TimeoutError):
            await store.add_messages(batch, context)
        await store.add_messages(batch, context)  # the manager sends it again

    asyncio.run(go())
    view = scripted_store.get_session("bo-chat")
    assert [m.content for m in view.messages] == ["I moved to Porto.", "Noted."]
    assert view.actor_id == "bo" and view.messages[0].item == batch[0]


def test_the_same_turn_of_two_runs_is_kept_twice(scripted_store):
    """Two agents in turn on one store, each saying the same: Strands numbers each run from 0,
    so the second batch has the first one's numbers and messages, and it is not a retry."""
    store = KiviDBMemoryStore(actor_id="cy", store=scripted_store, session_id="cy-chat")
    batch = [
        {"role": "user", "content": [{"text": "yes"}]},
        {"role": "assistant", "content": [{"text": "Done."}]},
    ]

    async def go() -> None:
        for _ in range(2):
            await store.add_messages(batch, AddMessagesContext(sequence_numbers=[0, 1]))

    asyncio.run(go())
    contents = [m.content for m in scripted_store.get_session("cy-chat").messages]
    assert contents == ["yes", "Done.", "yes", "Done."]


def test_a_failed_batch_sent_again_with_the_next_messages_is_kept_once(scripted_store):
    """Strands sends a batch that failed again together with the messages that came after it:
    the failed part goes under its own key (kept once), the rest under a new one."""
    store = KiviDBMemoryStore(
        actor_id="di", store=_AnswerLost(scripted_store), session_id="di-chat"
    )
    first = [
        {"role": "user", "content": [{"text": "one"}]},
        {"role": "assistant", "content": [{"text": "two"}]},
    ]
    later = [{"role": "user", "content": [{"text": "three"}]}]

    async def go() -> None:
        with pytest.raises(TimeoutError):
            await store.add_messages(first, AddMessagesContext(sequence_numbers=[2, 3]))
        await store.add_messages(first + later, AddMessagesContext(sequence_numbers=[2, 3, 4]))

    asyncio.run(go())
    contents = [m.content for m in scripted_store.get_session("di-chat").messages]
    assert contents == ["one", "two", "three"]


class _SecondWriteFails:
    """A store client whose second ``add_events`` fails before it is sent, once."""

    def __init__(self, store: Any) -> None:
        self.store, self.writes = store, 0

    def add_events(self, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == 2:
            raise ConnectionError("the connection was refused")
        return self.store.add_events(*args, **kwargs)


@pytest.fixture
def plain_store():
    """A store of its own without a language model: its sessions are never summarized, so every
    message stays to be counted (the scripted store folds a long session into its summary)."""
    with MemoryClient() as client:
        instance, name = os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"] + "-plain"
        client.put_store(instance, name, dimensions=3)
        try:
            yield client.store(instance, name)
        finally:
            client.delete_store(instance, name)


def test_a_call_of_more_than_100_messages_failed_halfway_is_kept_once_when_sent_again(
    plain_store,
):
    """Its first 100 were kept, its last 30 not: sent again with one more message, each is kept
    once (the kept write goes again under its own key)."""
    store = KiviDBMemoryStore(
        actor_id="ed", store=_SecondWriteFails(plain_store), session_id="ed-chat"
    )
    messages: list[Any] = [
        {"role": "assistant" if i % 2 else "user", "content": [{"text": f"message {i}"}]}
        for i in range(131)
    ]

    def numbered(count: int) -> AddMessagesContext:
        return AddMessagesContext(sequence_numbers=list(range(count)))

    async def go() -> None:
        with pytest.raises(ConnectionError):
            await store.add_messages(messages[:130], numbered(130))
        await store.add_messages(messages, numbered(131))

    asyncio.run(go())
    kept = [m.content for m in plain_store.get_session("ed-chat", recent=1000).messages]
    assert kept == [f"message {i}" for i in range(131)]


def test_a_photo_and_a_very_long_message_do_not_stop_the_conversation(scripted_store):
    store = KiviDBMemoryStore(actor_id="fi", store=scripted_store, session_id="fi-chat")
    photo = {
        "role": "user",
        "content": [
            {"text": "What is in this photo?"},
            {"image": {"format": "png", "source": {"bytes": b"\x89PNG" + bytes(40_000)}}},
        ],
    }
    long = {"role": "assistant", "content": [{"text": "y" * 33_000}]}
    asyncio.run(store.add_messages([photo, long], AddMessagesContext(sequence_numbers=[0, 1])))
    first, second = scripted_store.get_session("fi-chat").messages
    assert first.content == "What is in this photo?"
    assert first.item["content"][1] == {"image": {"format": "png", "source": {}}}
    assert len(second.content) <= 32_000 and second.content.endswith("characters cut]")
    assert second.item is None
