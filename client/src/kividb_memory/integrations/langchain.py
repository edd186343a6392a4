"""LangChain's ``BaseChatMessageHistory`` on a KiviDB session: ``KiviDBChatMessageHistory``.

``pip install "kividb-memory[langchain]"``. Each message is one message of the session whose
``item`` is LangChain's own serialization of it (``message_to_dict``: the message's class and
every field, tool calls and ``tool_call_id`` included), so a history reads back the same
messages, of the same classes; its role is ``user`` (human), ``assistant`` (AI and the rest),
``system`` or ``tool``, and its content is the message's text (recall, summaries and extraction
read that). Mapping and limits: docs/integrations.md, "LangChain".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.integrations.sessions import (
    AnyStore,
    batches,
    forget,
    read_messages,
    run_now,
    store_from_env,
)
from kividb_memory.models import Message

_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


def message_role(message: BaseMessage) -> str:
    """The API role of ``message``: by its type (``human``, ``ai``, ``system``, ``tool``,
    ``function``, and their ``...MessageChunk`` forms), a ``ChatMessage`` by its own ``role``;
    ``assistant`` for anything else."""
    kind = message.type
    if kind.endswith("MessageChunk"):
        kind = kind.removesuffix("MessageChunk").lower()
    if kind == "chat":
        kind = str(getattr(message, "role", "")).lower()
    return _ROLES.get(kind, "assistant")


_PLAIN: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "assistant": AIMessage,
    "system": SystemMessage,
}


def message_event(message: BaseMessage) -> dict[str, Any]:
    """The event that keeps ``message``: its role, its text as ``content`` when it has any, and
    ``message_to_dict`` of it as the item."""
    event: dict[str, Any] = {
        "role": message_role(message),
        "item": message_to_dict(message),
    }
    text = str(message.text)
    if text:
        event["content"] = text
    return event


def stored_message(message: Message) -> BaseMessage:
    """The LangChain message a stored one keeps; a message added without one (by another
    client) as the message of its role with its content (a tool message without its call id
    as an AI message)."""
    item = message.item
    if (
        item is not None
        and isinstance(item.get("type"), str)
        and isinstance(item.get("data"), dict)
    ):
        return messages_from_dict([item])[0]
    return _PLAIN.get(message.role, AIMessage)(content=message.content)


class KiviDBChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history kept as the KiviDB session ``session_id`` (the API's session id
    alphabet: letters, digits and ``._:@-``, 1 to 256 characters). ``store``: a ``StoreClient``
    (sync and async methods) or an ``AsyncStoreClient`` (async methods only: a sync one raises
    ``TypeError``); left out, a ``StoreClient`` from the environment (``KIVIDB_API_URL``,
    ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE``, ``KIVIDB_STORE``). ``actor_id``: the actor the
    session belongs to. Errors: the client's (``ApiError`` and its kinds,
    ``ApiConnectionError``)."""

    def __init__(
        self,
        session_id: str,
        *,
        store: StoreClient | AsyncStoreClient | None = None,
        actor_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.actor_id = actor_id
        self._store = AnyStore(store if store is not None else store_from_env())

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session kept verbatim, oldest first."""
        found = run_now(read_messages(self._store.call_now, self.session_id, None))
        return [stored_message(m) for m in found]

    async def aget_messages(self) -> list[BaseMessage]:
        """``messages``, for async code."""
        found = await read_messages(self._store.call, self.session_id, None)
        return [stored_message(m) for m in found]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Keep ``messages`` after the others, in order (batches of 100, each sent with an
        idempotency key, so a retried batch is kept once)."""
        for batch in batches([message_event(m) for m in messages]):
            self._store.call_sync("add_events", self.session_id, batch, actor_id=self.actor_id)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """``add_messages``, for async code."""
        for batch in batches([message_event(m) for m in messages]):
            await self._store.call("add_events", self.session_id, batch, actor_id=self.actor_id)

    def clear(self) -> None:
        """Forget the session's messages (the session is deleted)."""
        run_now(forget(self._store.call_now, self.session_id))

    async def aclear(self) -> None:
        """``clear``, for async code."""
        await forget(self._store.call, self.session_id)
