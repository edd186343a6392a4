"""``KiviDBChatMessageHistory`` on the local stack with LangChain's own messages, its
``RunnableWithMessageHistory`` and its fake chat model: every kind of message reads back as the
same message (tool calls and tool call ids included), sync and async."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.langchain import KiviDBChatMessageHistory

CONVERSATION = [
    SystemMessage(content="You are terse."),
    HumanMessage(content="Weather in Lisbon? ☀️", additional_kwargs={"lang": "en"}),
    AIMessage(
        content="",
        tool_calls=[
            {"name": "weather", "args": {"city": "Lisbon"}, "id": "call_1", "type": "tool_call"}
        ],
    ),
    ToolMessage(content="22 C", tool_call_id="call_1", name="weather"),
    AIMessage(content=[{"type": "text", "text": "It is 22 C."}], id="run-1"),
]


def test_every_kind_of_message_reads_back_as_the_same_message(memory_store):
    history = KiviDBChatMessageHistory("lc-1", store=memory_store, actor_id="ann")
    history.add_messages(CONVERSATION)
    assert history.messages == CONVERSATION
    back = history.messages
    assert back[2].tool_calls[0]["id"] == "call_1" and back[3].tool_call_id == "call_1"
    view = memory_store.get_session("lc-1")
    assert [m.role for m in view.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m.content for m in view.messages][3:] == ["22 C", "It is 22 C."]
    history.clear()
    assert history.messages == []


def test_the_async_methods_with_an_async_store(stack, memory_store):
    async def go():
        async with AsyncMemoryClient(stack.url, stack.api_key) as client:
            store = client.store(memory_store.instance_id, memory_store.name)
            history = KiviDBChatMessageHistory("lc-2", store=store)
            await history.aadd_messages(CONVERSATION)
            read = await history.aget_messages()
            await history.aclear()
            with pytest.raises(TypeError, match="StoreClient"):
                history.add_messages(CONVERSATION[:1])
            return read, await history.aget_messages()

    read, cleared = asyncio.run(go())
    assert read == CONVERSATION and cleared == []


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_a_runnable_with_message_history_remembers_the_first_turn(memory_store):
    model = FakeMessagesListChatModel(
        responses=[AIMessage(content="Nice to meet you, Ann."), AIMessage(content="Ann.")]
    )
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    seen: list[list] = []

    def record(value):
        seen.append(value.to_messages())
        return value

    chain = RunnableWithMessageHistory(
        prompt | record | model,
        lambda session_id: KiviDBChatMessageHistory(session_id, store=memory_store),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "lc-3"}}
    chain.invoke({"question": "I am Ann."}, config=config)
    answer = chain.invoke({"question": "What is my name?"}, config=config)
    assert answer.content == "Ann."
    assert [m.content for m in seen[1]] == [
        "I am Ann.",
        "Nice to meet you, Ann.",
        "What is my name?",
    ]
    assert memory_store.get_session("lc-3").message_count == 4


def test_chunks_and_chat_messages_keep_the_role_they_speak_in():
    from langchain_core.messages import (
        ChatMessage,
        FunctionMessage,
        HumanMessageChunk,
        SystemMessageChunk,
        ToolMessageChunk,
    )

    from kividb_memory.integrations.langchain import message_role

    messages = [
        HumanMessageChunk(content="h"),
        SystemMessageChunk(content="s"),
        ToolMessageChunk(content="t", tool_call_id="c"),
        ChatMessage(content="c", role="user"),
        ChatMessage(content="c", role="system"),
        FunctionMessage(content="f", name="f"),
        AIMessage(content="a"),
        ChatMessage(content="c", role="narrator"),
    ]
    roles = ["user", "system", "tool", "user", "system", "tool", "assistant", "assistant"]
    assert [message_role(m) for m in messages] == roles


def test_a_store_that_does_not_exist_is_an_error_on_reads_too(memory):
    from kividb_memory import NotFoundError

    history = KiviDBChatMessageHistory("s", store=memory.store("local", "no-such-store"))
    with pytest.raises(NotFoundError, match="store"):
        _ = history.messages
    with pytest.raises(NotFoundError):
        history.clear()


def test_a_session_that_does_not_exist_reads_as_empty(memory_store):
    history = KiviDBChatMessageHistory("never-written", store=memory_store)
    assert history.messages == []
    history.clear()  # nothing to forget, and no error
