"""LlamaIndex's own runtime on ``KiviDBChatStore`` and ``KiviDBMemoryBlock``: a ``FunctionAgent``
with a tool, over the test double llama-index-core ships for function-calling models
(``MockFunctionCallingLLM``), its memory a ``ChatMemoryBuffer`` on the chat store, then a
``Memory`` with the block. llama-index-core publishes no tests in its source distribution
(docs/integrations.md, "LlamaIndex")."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer, Memory

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.llamaindex import KiviDBChatStore, KiviDBMemoryBlock
from tests.support.stack import model_store


def remember_city(city: str) -> str:
    """Keep where the user lives."""
    return f"kept {city}"


class Script:
    """The model's answers in order; every call's messages recorded."""

    def __init__(self, *answers: ChatMessage) -> None:
        self.answers = list(answers)
        self.seen: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], **_: Any) -> ChatMessage:
        self.seen.append(list(messages))
        return self.answers.pop(0)


def _call_tool() -> ChatMessage:
    call = ToolCallBlock(
        tool_call_id="call-1", tool_name="remember_city", tool_kwargs={"city": "Porto"}
    )
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


def _say(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def _agent(script: Script) -> FunctionAgent:
    llm = MockFunctionCallingLLM(response_generator=script, is_chat_model=True)
    return FunctionAgent(tools=[remember_city], llm=llm, system_prompt="You are terse.")


def test_an_agent_run_is_kept_by_the_chat_store_and_read_back_equal(memory_store):
    async def go() -> None:
        store = KiviDBChatStore(memory_store, actor_id="ann")
        buffer = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="chat-1")
        script = Script(_call_tool(), _say("Noted: Porto."))
        await _agent(script).run(user_msg="I moved to Porto.", memory=buffer)
        kept = await store.aget_messages("chat-1")
        assert [m.role for m in kept] == [
            MessageRole.USER,
            MessageRole.ASSISTANT,
            MessageRole.TOOL,
            MessageRole.ASSISTANT,
        ]
        assert kept[1].blocks[0].tool_name == "remember_city"  # type: ignore[union-attr]
        assert kept[2].additional_kwargs["tool_call_id"] == "call-1"
        assert kept[3].content == "Noted: Porto."

        # a new store object (a new process) gives the next turn its history back
        again = KiviDBChatStore(memory_store, actor_id="ann")
        assert again.get_messages("chat-1") == kept
        script2 = Script(_say("You live in Porto."))
        buffer2 = ChatMemoryBuffer.from_defaults(chat_store=again, chat_store_key="chat-1")
        await _agent(script2).run(user_msg="Where do I live?", memory=buffer2)
        seen = script2.seen[0]
        assert [m.content for m in seen if m.role == MessageRole.USER] == [
            "I moved to Porto.",
            "Where do I live?",
        ]
        view = memory_store.get_session(again.session_id("chat-1"))
        assert view.actor_id == "ann"
        assert [m.role for m in view.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]

    asyncio.run(go())


def test_every_method_of_the_chat_store(stack, memory_store):
    store = KiviDBChatStore(memory_store, actor_id="ann")
    first = [ChatMessage(role=MessageRole.USER, content=f"m{i}") for i in range(3)]
    store.set_messages("a b/ü", first)  # a key outside the API's alphabet
    store.add_message("k2", ChatMessage(role=MessageRole.SYSTEM, content="s"))
    assert store.get_keys() == ["a b/ü", "k2"]
    assert store.delete_message("a b/ü", 1) == first[1]
    assert store.delete_message("a b/ü", 9) is None
    assert store.get_messages("a b/ü") == [first[0], first[2]]
    assert store.delete_last_message("a b/ü") == first[2]
    assert store.delete_messages("a b/ü") == [first[0]]
    assert store.get_messages("a b/ü") == [] and store.get_keys() == ["k2"]
    assert KiviDBChatStore(memory_store, actor_id="bob").get_keys() == []

    async def with_async_client() -> list[ChatMessage]:
        async with AsyncMemoryClient(stack.url, stack.api_key) as client:
            handle = client.store(memory_store.instance_id, memory_store.name)
            chats = KiviDBChatStore(handle, actor_id="ann")
            await chats.async_add_message("k3", ChatMessage(role=MessageRole.USER, content="x"))
            return await chats.aget_messages("k3")

    assert [m.content for m in asyncio.run(with_async_client())] == ["x"]


def test_the_memory_block_gives_the_model_the_actors_memories(open_stack, memory, provider):
    name = model_store(memory, provider).rsplit("/", 1)[1]
    store = memory.store("local", name)
    try:
        store.add_memory("Ann keeps bees on her roof.", actor_id="ann")
        store.add_memory("Bob collects stamps.", actor_id="bob")

        async def go() -> Script:
            block = KiviDBMemoryBlock(store, actor_id="ann", search_mode="keyword")
            memory_ = Memory.from_defaults(session_id="li-1", memory_blocks=[block])
            script = Script(_say("You keep bees."))
            await _agent(script).run(user_msg="What do I keep bees on?", memory=memory_)
            flushed = [ChatMessage(role=MessageRole.USER, content="I keep bees.")]
            await block.aput(flushed)
            await block.aput(flushed)  # a flush sent again
            return script

        script = asyncio.run(go())
        shown = "\n".join(str(m.content) for m in script.seen[0])
        assert "Ann keeps bees on her roof." in shown and "stamps" not in shown
        view = store.get_session("llamaindex-memory:ann")
        assert [m.content for m in view.messages] == ["I keep bees."]
    finally:
        memory.delete_store("local", name)
