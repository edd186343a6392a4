"""LlamaIndex's chat store and a memory block on a KiviDB store: ``KiviDBChatStore`` (a
``BaseChatStore``, for ``ChatMemoryBuffer`` and the other memories that take one) and
``KiviDBMemoryBlock`` (a ``BaseMemoryBlock`` for ``llama_index.core.memory.Memory``).

``pip install "kividb-memory[llamaindex]"``. A chat key is a KiviDB session of ``actor_id``
(``llamaindex:<actor>:<key>``, hashed when outside the API's alphabet; ``session_id_of``), each
``ChatMessage`` one of its messages: the role (``user``; ``system`` for system and developer;
``tool`` for tool and function; ``assistant`` for assistant, chatbot and model), its text as
``content``, and the message itself (blocks, tool calls, ``additional_kwargs``) as the ``item``,
so messages read back equal. The keys are listed from a registry of keyed memories
(``("llamaindex", "chat-keys", actor)``). The memory block gives the model the actor's
long-term memories found for the conversation's last user message, and hands the messages the
short-term memory lets go of to the actor's session, where the store's extraction keeps what
they say. Mapping and limits: docs/integrations.md, "LlamaIndex".

What does not map: a message over 32,000 characters as JSON keeps its text but not its item
(an image's bytes, say), and reads back as a text message; ``set_messages`` and
``delete_message`` rewrite the session (delete, then add with the messages' own times), so
they are not atomic against another writer of the same key; a store with a language model folds
older messages into a summary once there are more than ``summarize_after`` (give chat stores a
store without one, or a large ``summarize_after``); LlamaIndex's ``SQLAlchemyChatStore`` (the
``sql_store`` of ``Memory``) is another interface: ``Memory`` keeps its short-term messages
there, and this block is its long-term part.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import Field, PrivateAttr

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.errors import NotFoundError
from kividb_memory.integrations.sessions import (
    AnyStore,
    async_store_from_env,
    batches,
    forget,
    label,
    pop,
    read_messages,
    run_now,
    session_id_of,
    store_from_env,
)
from kividb_memory.models import Message, SearchMode

Call = Callable[..., Awaitable[Any]]
MAX_CHARS = 32_000
PAGE = 1000
_ROLES = {
    MessageRole.USER: "user",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}


def message_event(message: ChatMessage) -> dict[str, Any]:
    """The event of one ``ChatMessage`` (see the module)."""
    item = message.model_dump(mode="json")
    event: dict[str, Any] = {"role": _ROLES.get(message.role, "assistant")}
    if len(json.dumps(item, ensure_ascii=False, separators=(",", ":"))) <= MAX_CHARS:
        event["item"] = item
    text = message.content or ""
    if text:
        event["content"] = text[:MAX_CHARS]
    return event


def chat_message(message: Message) -> ChatMessage:
    """The ``ChatMessage`` a message keeps; one kept without it as a text message."""
    if message.item is not None and "role" in message.item:
        return ChatMessage.model_validate(message.item)
    role = {"user": MessageRole.USER, "system": MessageRole.SYSTEM, "tool": MessageRole.TOOL}
    return ChatMessage(role=role.get(message.role, MessageRole.ASSISTANT), content=message.content)


class _Chats:
    """The chat store's operations written once over ``call``."""

    def __init__(self, actor_id: str | None) -> None:
        self.actor_id = actor_id
        self.registry = ("llamaindex", "chat-keys", label(actor_id or "-"))
        self.known: set[str] = set()

    def session(self, key: str) -> str:
        return session_id_of("llamaindex", self.actor_id or "-", key)

    async def register(self, call: Call, key: str) -> None:
        if key not in self.known:
            await call(
                "put_keyed_memory",
                self.registry,
                key,
                {"session_id": self.session(key)},
                index=False,
            )
            self.known.add(key)

    async def unregister(self, call: Call, key: str) -> None:
        self.known.discard(key)
        try:
            await call("delete_keyed_memory", self.registry, key)
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise

    async def add(self, call: Call, key: str, events: list[dict[str, Any]]) -> None:
        await self.register(call, key)
        for batch in batches(events):
            await call("add_events", self.session(key), batch, actor_id=self.actor_id)

    async def get(self, call: Call, key: str) -> list[Message]:
        return await read_messages(call, self.session(key), None)

    async def set(self, call: Call, key: str, messages: list[ChatMessage]) -> None:
        await forget(call, self.session(key))
        await self.add(call, key, [message_event(m) for m in messages])

    async def delete_all(self, call: Call, key: str) -> list[ChatMessage] | None:
        kept = await self.get(call, key)
        await forget(call, self.session(key))
        await self.unregister(call, key)
        return [chat_message(m) for m in kept] or None

    async def delete_at(self, call: Call, key: str, idx: int) -> ChatMessage | None:
        kept = await self.get(call, key)
        if idx < 0 or idx >= len(kept):
            return None
        await forget(call, self.session(key))
        rest = [
            {**message_event(chat_message(m)), "created_at": m.created_at.isoformat()}
            for i, m in enumerate(kept)
            if i != idx
        ]
        await self.add(call, key, rest)
        return chat_message(kept[idx])

    async def delete_last(self, call: Call, key: str) -> ChatMessage | None:
        message = await pop(call, self.session(key))
        return None if message is None else chat_message(message)

    async def keys(self, call: Call) -> list[str]:
        found: list[str] = []
        offset = 0
        while True:
            page = await call("search_keyed_memories", self.registry, limit=PAGE, offset=offset)
            found.extend(v.key for v in page.items if tuple(v.namespace) == self.registry)
            if page.next_offset is None:  # a page may be cut short by bytes: follow it
                return sorted(found)
            offset = page.next_offset


class KiviDBChatStore(BaseChatStore):
    """LlamaIndex's chat store on a KiviDB store: each key a session of ``actor_id`` (see the
    module). ``store``: a ``StoreClient`` (sync and async methods) or an ``AsyncStoreClient``
    (the async ones; a sync one raises ``TypeError``), None for one from ``KIVIDB_API_URL``,
    ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE``. ``actor_id``: whose chats
    these are (LlamaIndex's chat store has no user); None keeps them without an actor. Errors:
    the client's (``ApiError`` and its kinds, ``ApiConnectionError``)."""

    actor_id: str | None = None
    _store: AnyStore = PrivateAttr()
    _chats: _Chats = PrivateAttr()

    def __init__(
        self,
        store: StoreClient | AsyncStoreClient | None = None,
        *,
        actor_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_id=actor_id, **kwargs)
        self._store = AnyStore(store if store is not None else store_from_env())
        self._chats = _Chats(actor_id)

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name of the class."""
        return "KiviDBChatStore"

    def session_id(self, key: str) -> str:
        """The KiviDB session that keeps ``key``'s messages."""
        return self._chats.session(key)

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the key's messages with ``messages``."""
        run_now(self._chats.set(self._store.call_now, key, messages))

    def get_messages(self, key: str) -> list[ChatMessage]:
        """The key's messages, oldest first (``[]`` for a key never written)."""
        kept = run_now(self._chats.get(self._store.call_now, key))
        return [chat_message(m) for m in kept]

    def add_message(self, key: str, message: ChatMessage) -> None:
        """Add ``message`` after the key's others."""
        run_now(self._chats.add(self._store.call_now, key, [message_event(message)]))

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Forget the key and its messages; the messages it had, or None."""
        return run_now(self._chats.delete_all(self._store.call_now, key))

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Forget the key's message at ``idx``; it, or None when there is none there."""
        return run_now(self._chats.delete_at(self._store.call_now, key, idx))

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Take back the key's newest message (one atomic step); it, or None."""
        return run_now(self._chats.delete_last(self._store.call_now, key))

    def get_keys(self) -> list[str]:
        """Every key this actor has written, in order."""
        return run_now(self._chats.keys(self._store.call_now))

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """``set_messages`` for async code."""
        await self._chats.set(self._store.call, key, messages)

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """``get_messages`` for async code."""
        return [chat_message(m) for m in await self._chats.get(self._store.call, key)]

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        """``add_message`` for async code."""
        await self._chats.add(self._store.call, key, [message_event(message)])

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """``delete_messages`` for async code."""
        return await self._chats.delete_all(self._store.call, key)

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """``delete_message`` for async code."""
        return await self._chats.delete_at(self._store.call, key, idx)

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """``delete_last_message`` for async code."""
        return await self._chats.delete_last(self._store.call, key)

    async def aget_keys(self) -> list[str]:
        """``get_keys`` for async code."""
        return await self._chats.keys(self._store.call)


class KiviDBMemoryBlock(BaseMemoryBlock[str]):
    """A ``Memory`` block of the actor's long-term memories in a KiviDB store.

    ``aget`` searches the actor's memories for the conversation's last user message (``limit``
    of them, ``search_mode`` ``hybrid`` by default, ``keyword`` for a store without an
    embedding model) and gives them as lines ``- <memory>``, or ``""`` when none is found.
    ``aput`` adds the messages the short-term memory lets go of to the actor's session
    ``session_id`` (default ``llamaindex-memory:<actor>``), with an idempotency key made of
    the messages, so a flush sent again is kept once; the store's extraction (its language
    model) draws memories from them. ``store``: as ``KiviDBChatStore``'s, either client."""

    name: str = "kividb"
    description: str | None = "What is known about the user from past conversations."
    actor_id: str = Field(description="Whose memories these are.")
    session_id: str | None = None
    search_mode: SearchMode = "hybrid"
    limit: int | None = None
    _store: AnyStore = PrivateAttr()

    def __init__(self, store: StoreClient | AsyncStoreClient | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._store = AnyStore(store if store is not None else async_store_from_env())

    def _session(self) -> str:
        return self.session_id or session_id_of("llamaindex-memory", self.actor_id)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        asked = [m.content for m in messages or [] if m.role == MessageRole.USER and m.content]
        if not asked:
            return ""
        found = await self._store.call(
            "search",
            asked[-1][:8000],
            mode=self.search_mode,
            actor_id=self.actor_id,
            limit=self.limit,
        )
        return "\n".join(f"- {m.text}" for m in found.memories)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        events = [message_event(m) for m in messages]
        for batch in batches(events):
            digest = hashlib.sha256(json.dumps(batch, sort_keys=True).encode()).hexdigest()
            await self._store.call(
                "add_events",
                self._session(),
                batch,
                actor_id=self.actor_id,
                idempotency_key=f"llamaindex:{digest}",
            )


__all__ = ["KiviDBChatStore", "KiviDBMemoryBlock", "chat_message", "message_event"]
