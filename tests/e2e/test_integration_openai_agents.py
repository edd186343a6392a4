"""``KiviDBSession`` with the Agents SDK's own ``Runner`` and ``ScriptedModel`` on the local
stack: tool calls, their outputs and messages come back exactly as the SDK kept them, a second
run sees the first, and the session is a KiviDB session others can read (recall, the console)."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.openai_agents import KiviDBSession, item_event

set_tracing_disabled(True)  # the SDK would export traces to OpenAI (no key, no network here)


@function_tool
def city_weather(city: str) -> str:
    """The weather in a city."""
    return f"22 C and sunny in {city}"


def _run(coroutine):
    return asyncio.run(coroutine)


def test_a_run_with_a_tool_call_is_kept_item_for_item_and_seen_by_the_next(stack, memory_store):
    model = ScriptedModel()
    agent = Agent(name="weather", model=model, tools=[city_weather])
    model.enqueue([function_call("city_weather", {"city": "Lisbon"}, call_id="call_1")])
    model.enqueue([assistant_message("It is 22 C and sunny in Lisbon.")])
    model.enqueue([assistant_message("You asked about Lisbon.")])

    async def go():
        async with AsyncMemoryClient(stack.url, stack.api_key) as client:
            store = client.store(memory_store.instance_id, memory_store.name)
            session = KiviDBSession("chat-1", store=store, actor_id="ann")
            first = await Runner.run(agent, "Weather in Lisbon?", session=session)
            kept = await session.get_items()
            second = await Runner.run(agent, "Which city did I ask about?", session=session)
            return first, kept, second, model.calls[-1].input

    first, kept, second, last_input = _run(go())
    assert first.final_output == "It is 22 C and sunny in Lisbon."
    assert [item.get("type", "message") for item in kept] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert kept[1]["call_id"] == kept[2]["call_id"] == "call_1"
    assert kept[2]["output"] == "22 C and sunny in Lisbon"
    assert kept == first.to_input_list()  # exactly what the SDK holds
    assert second.final_output == "You asked about Lisbon."
    assert last_input[: len(kept)] == kept  # the second run was given the first whole
    view = memory_store.get_session("chat-1")
    assert view.actor_id == "ann"
    assert [m.role for m in view.messages[:4]] == ["user", "assistant", "tool", "assistant"]
    assert view.messages[2].content == "22 C and sunny in Lisbon"  # the text prompts read
    recalled = memory_store.recall("chat-1")
    assert "22 C and sunny in Lisbon" in recalled.context


def test_a_sync_store_client_serves_an_async_session(memory_store):
    session = KiviDBSession("sync-1", store=memory_store)
    items = [{"role": "user", "content": f"m{i}"} for i in range(150)]  # two batches

    async def go():
        await session.add_items(items)
        everything = await session.get_items()
        latest = await session.get_items(limit=3)
        popped = await session.pop_item()
        await session.clear_session()
        return everything, latest, popped, await session.get_items()

    everything, latest, popped, cleared = _run(go())
    assert everything == items and latest == items[-3:] and popped == items[-1]
    assert cleared == []


def test_without_store_and_without_the_environment_it_says_what_to_set(monkeypatch):
    for name in ("KIVIDB_INSTANCE", "KIVIDB_STORE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="KIVIDB_INSTANCE"):
        KiviDBSession("s")


def test_items_map_to_roles_and_text():
    assert item_event({"role": "developer", "content": "Be brief."}) == {
        "role": "system",
        "item": {"role": "developer", "content": "Be brief."},
        "content": "Be brief.",
    }
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    assert item_event(call) == {"role": "assistant", "item": call}
    output = {"type": "function_call_output", "call_id": "c", "output": "done"}
    assert item_event(output) == {"role": "tool", "item": output, "content": "done"}
    parts = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "a"},
            {"type": "input_image", "image_url": "x"},
            {"type": "input_text", "text": "b"},
        ],
    }
    assert item_event(parts)["content"] == "a\nb"
    reasoning = {"type": "reasoning", "id": "r", "summary": []}
    assert item_event(reasoning) == {"role": "assistant", "item": reasoning}
