"""A LangChain chain whose chat history is a KiviDB session.

Run against the local stack (`make run`, then in another shell):

    KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
    KIVIDB_INSTANCE=local KIVIDB_STORE=examples .venv/bin/python examples/langchain_history.py

The model is LangChain's own fake chat model, so it runs offline; any chat model fits in its
place. The store is created if it is missing.
"""

from __future__ import annotations

import os
import warnings

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

from kividb_memory import MemoryClient
from kividb_memory.integrations.langchain import KiviDBChatMessageHistory

# langchain-core 1.x deprecates RunnableWithMessageHistory for LangGraph's persistence; it is
# still LangChain's way to give a chain a BaseChatMessageHistory, which is what this shows.
warnings.filterwarnings("ignore", message="RunnableWithMessageHistory is deprecated")


def main() -> None:
    instance, name = os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"]
    with MemoryClient() as client:
        client.put_store(instance, name)
        store = client.store(instance, name)
        KiviDBChatMessageHistory("example-lc", store=store).clear()
        model = FakeMessagesListChatModel(
            responses=[AIMessage("Nice to meet you, Ann."), AIMessage("You are Ann.")]
        )
        prompt = ChatPromptTemplate.from_messages(
            [MessagesPlaceholder("history"), ("human", "{question}")]
        )
        chain = RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: KiviDBChatMessageHistory(session_id, store=store),
            input_messages_key="question",
            history_messages_key="history",
        )
        config = RunnableConfig(configurable={"session_id": "example-lc"})
        chain.invoke({"question": "Hi, I am Ann."}, config=config)
        print(chain.invoke({"question": "Who am I?"}, config=config).content)
        print(f"the session keeps {store.get_session('example-lc').message_count} messages")


if __name__ == "__main__":
    main()
