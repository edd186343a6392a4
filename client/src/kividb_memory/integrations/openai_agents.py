"""The OpenAI Agents SDK's ``Session`` on a KiviDB session: ``KiviDBSession``.

``pip install "kividb-memory[openai-agents]"``. Each input item (a message, a function call and
its output, a reasoning item, any other Responses input item) is one message of the session,
whose ``item`` is the item itself: ``get_items`` gives back exactly what ``add_items`` was
given, in order. The message's role is the item's (``developer`` kept as ``system``), else
``tool`` for an item whose type ends in ``_output`` and ``assistant`` for the rest; its content
is the item's text when it has one (recall, summaries and extraction read that). Mapping and
limits: docs/integrations.md, "OpenAI Agents SDK".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.integrations.sessions import (
    AnyStore,
    async_store_from_env,
    batches,
    forget,
    pop,
    read_messages,
)
from kividb_memory.models import Message

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def item_event(item: Mapping[str, Any] | Any) -> dict[str, Any]:
    """The event that keeps ``item`` (a dict, or a pydantic model of one): its role, its text as
    ``content`` when it has one, and the item itself."""
    if not isinstance(item, Mapping):
        item = item.model_dump(mode="json", exclude_unset=True)
    kept = dict(item)
    role = _ROLES.get(str(kept.get("role")))
    if role is None:
        role = "tool" if str(kept.get("type", "")).endswith("_output") else "assistant"
    event: dict[str, Any] = {"role": role, "item": kept}
    text = _text(kept)
    if text:
        event["content"] = text
    return event


def _text(item: Mapping[str, Any]) -> str | None:
    """What the item says in words: its ``content`` text (or the texts of its content parts),
    or a tool output's ``output`` text; ``None`` for anything else."""
    content = item.get("content", item.get("output"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        joined = "\n".join(t for t in texts if isinstance(t, str) and t)
        return joined or None
    return None


def message_item(message: Message) -> dict[str, Any]:
    """The item a message keeps; a message added without one (by another client) as an
    ``EasyInputMessage``-shaped ``{"role", "content"}``."""
    if message.item is not None:
        return dict(message.item)
    return {"role": message.role, "content": message.content}


class KiviDBSession(SessionABC):
    """An Agents SDK session kept as the KiviDB session ``session_id`` (the API's session id
    alphabet: letters, digits and ``._:@-``, 1 to 256 characters; another id is refused by the
    API, ``ValidationError``). ``store``: a ``StoreClient`` or ``AsyncStoreClient``; left out,
    one from the environment (``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE``,
    ``KIVIDB_STORE``), closed by :meth:`close`. ``actor_id``: the actor the session belongs to
    (its long-term memories are that actor's). ``session_settings``: the SDK's (default
    ``SessionSettings()``), whose ``limit`` bounds ``get_items`` when it is given none.
    Errors: the client's (``ApiError`` and its kinds, ``ApiConnectionError``)."""

    def __init__(
        self,
        session_id: str,
        *,
        store: StoreClient | AsyncStoreClient | None = None,
        actor_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.actor_id = actor_id
        self._owned = store is None
        self._store = AnyStore(store if store is not None else async_store_from_env())

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items (all when ``None``), oldest first."""
        settings = self.session_settings
        if limit is None and settings is not None:
            limit = settings.limit
        if limit is not None and limit <= 0:
            return []
        messages = await read_messages(self._store.call, self.session_id, limit)
        return [cast("TResponseInputItem", message_item(m)) for m in messages]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Keep ``items`` after the session's others, in order (batches of 100, each sent with
        an idempotency key, so a retried batch is kept once)."""
        events = [item_event(item) for item in items]
        for batch in batches(events):
            await self._store.call("add_events", self.session_id, batch, actor_id=self.actor_id)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the newest item; ``None`` when the session has none."""
        message = await pop(self._store.call, self.session_id)
        return None if message is None else cast("TResponseInputItem", message_item(message))

    async def clear_session(self) -> None:
        """Forget every item of the session (the session is deleted)."""
        await forget(self._store.call, self.session_id)

    async def close(self) -> None:
        """Close the client this session made from the environment (not one it was given)."""
        if self._owned and isinstance(self._store.store, AsyncStoreClient):
            await self._store.store.client.aclose()
