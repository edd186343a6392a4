"""A Strands ``MemoryStore`` on a KiviDB store's long-term memory: ``KiviDBMemoryStore``.

``pip install "kividb-memory[strands]"``. ``search`` is the store's search for one actor (hybrid
by default: keywords and meaning); ``add`` keeps a memory of the actor (redacted and deduplicated
as every memory is); ``add_messages`` adds a batch of the conversation to the actor's session,
where the store's own extraction (its language model) draws memories from it once the
conversation goes quiet. Each batch goes with an idempotency key made of the run and the
messages' sequence numbers (``AddMessagesContext``), so a batch the manager sends again is kept
once. Mapping and limits: docs/integrations.md, "Strands Agents".
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from strands.memory import AddMessagesContext, MemoryEntry, MemoryStore, SearchOptions
from strands.types.content import Message

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.integrations.sessions import AnyStore, async_store_from_env, batches
from kividb_memory.models import SearchMode

DESCRIPTION = "Long-term memory of the user: facts, preferences and events from past sessions."
MAX_MESSAGE_CHARS = 32_000
"""The API's limit of a message's ``content``, and of its ``item`` as compact JSON."""


def _without_bytes(value: Any) -> Any:
    """``value`` without media bytes: Strands' image, document and video blocks hold theirs under
    ``source.bytes``; those are left out (format, name and location kept), as is any other
    ``bytes`` value."""
    if isinstance(value, dict):
        return {
            k: _without_bytes(v)
            for k, v in value.items()
            if k != "bytes" and not isinstance(v, bytes | bytearray)
        }
    if isinstance(value, list | tuple):
        return [_without_bytes(v) for v in value if not isinstance(v, bytes | bytearray)]
    return value


def _cut(text: str) -> str:
    """``text`` within ``MAX_MESSAGE_CHARS``, ending with ``… [N characters cut]`` when cut."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    note = f" … [{len(text) - MAX_MESSAGE_CHARS} characters cut]"
    return text[: MAX_MESSAGE_CHARS - len(note)] + note


def message_event(message: Message) -> dict[str, Any]:
    """The event of one Strands message: its role, the text of its text blocks as content, and
    the message itself as the item (tool uses and results kept as given, media without their
    bytes), within the API's limits: a longer text is cut with a marker, a longer item left out
    (its text stays), so that a photo or one long message never stops a conversation from
    being kept."""
    texts = [b["text"] for b in message.get("content", []) if isinstance(b.get("text"), str)]
    item = json.loads(json.dumps(_without_bytes(message), default=str))
    item_json = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    event: dict[str, Any] = {"role": "assistant" if message.get("role") == "assistant" else "user"}
    if len(item_json) <= MAX_MESSAGE_CHARS:
        event["item"] = item
    text = "\n".join(t for t in texts if t) or (item_json if "item" not in event else "")
    if text:
        event["content"] = _cut(text)
    return event


class KiviDBMemoryStore(MemoryStore):
    """The long-term memory of ``actor_id`` in a KiviDB store, as a Strands ``MemoryStore``.
    ``store``: a ``StoreClient`` or ``AsyncStoreClient``; left out, one from the environment
    (``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE``, ``KIVIDB_STORE``).
    ``session_id``: the session ``add_messages`` adds to (default ``strands-<actor_id>``).
    ``search_mode``: ``hybrid`` (default), ``semantic`` or ``keyword`` (a store without an
    embedding model can search only by keyword). ``extraction``: Strands' setting; ``True``
    makes the manager hand batches of the conversation to ``add_messages`` (the store extracts
    them with its own language model). Errors: the client's (``ApiError`` and its kinds,
    ``ApiConnectionError``)."""

    def __init__(
        self,
        *,
        actor_id: str,
        store: StoreClient | AsyncStoreClient | None = None,
        name: str = "kividb",
        description: str = DESCRIPTION,
        writable: bool = True,
        max_search_results: int | None = None,
        search_mode: SearchMode = "hybrid",
        session_id: str | None = None,
        extraction: Any = None,
    ) -> None:
        self.name = name
        self.description = description
        self.writable = writable
        self.max_search_results = max_search_results
        self.extraction = extraction
        self.actor_id = actor_id
        self.session_id = session_id or f"strands-{actor_id}"
        self.search_mode: SearchMode = search_mode
        self._store = AnyStore(store if store is not None else async_store_from_env())
        self._run = uuid.uuid4().hex
        self._acknowledged: set[int] = set()
        """The sequence numbers kept under this run id."""
        self._unsure: list[tuple[str, list[tuple[int, str]]]] = []
        """The batches whose sending failed under this run id (they may have been kept): each
        key with its (sequence number, message digest) pairs; sent again, a batch goes under
        its key."""

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """The actor's memories best first for ``query`` (``max_search_results`` of the options,
        else the store's setting, else the API's default of 10)."""
        limit = (options or {}).get("max_search_results") or self.max_search_results
        found = await self._store.call(
            "search", query, mode=self.search_mode, actor_id=self.actor_id, limit=limit
        )
        return [
            MemoryEntry(
                content=memory.text,
                metadata={
                    "id": memory.id,
                    "score": memory.score,
                    "type": memory.type,
                    "created_at": memory.created_at.isoformat(),
                    **memory.metadata,
                },
            )
            for memory in found.memories
        ]

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> Any:
        """Keep ``content`` as a memory of the actor (``metadata`` as the memory's); the kept
        ``MemoryView`` (the one it duplicates, ``duplicate`` true, when the actor has it)."""
        return await self._store.call(
            "add_memory", content, actor_id=self.actor_id, metadata=metadata or None
        )

    async def add_messages(
        self, messages: list[Message], context: AddMessagesContext | None = None
    ) -> Any:
        """Add ``messages`` to the actor's session, in batches of 100, each with an idempotency
        key made of this store's run id and the messages' sequence numbers
        (``AddMessagesContext``). A batch whose sending failed (an error, a time-out: it may or
        may not have been kept) and that comes again with the same numbers and messages goes
        under the same key, so it is kept once, also when it comes back with the messages
        that followed it (``_plan``). Numbers this store already saw acknowledged
        belong to a new run (Strands numbers each agent run from 0, and one store may serve
        several agents in turn), as do numbers that come back with other messages: a new run
        id, so they are kept. Without sequence numbers each call is its own write (the
        client's own retries still send one key)."""
        events = [message_event(m) for m in messages]
        numbers = context.sequence_numbers if context is not None else None
        if numbers is None or len(numbers) != len(events):
            for batch in batches(events):
                await self._store.call("add_events", self.session_id, batch, actor_id=self.actor_id)
            return None
        digests = [
            hashlib.sha256(json.dumps(e, sort_keys=True).encode()).hexdigest() for e in events
        ]
        pairs = list(zip(numbers, digests, strict=True))
        unsure = {n: d for _, group in self._unsure for n, d in group}
        if any(n in self._acknowledged or unsure.get(n, d) != d for n, d in pairs):
            self._run, self._acknowledged, self._unsure = uuid.uuid4().hex, set(), []
        # Every write of this call stays unsure until the call has succeeded whole: Strands
        # sends a failed call's messages again, and a write of it that was kept must then go
        # under its own key again, or it would be kept twice.
        written: list[tuple[str, list[tuple[int, str]]]] = []
        for key, at in self._plan(pairs):
            group = [pairs[i] for i in at]
            try:
                await self._store.call(
                    "add_events",
                    self.session_id,
                    [events[i] for i in at],
                    actor_id=self.actor_id,
                    idempotency_key=key,
                )
            except BaseException:
                pending = {key, *(k for k, _ in written)}
                kept = [(k, g) for k, g in self._unsure if k not in pending]
                self._unsure = [*kept, *written, (key, group)]
                raise
            written.append((key, group))
        done = {k for k, _ in written}
        self._acknowledged.update(n for _, group in written for n, _ in group)
        self._unsure = [(k, g) for k, g in self._unsure if k not in done]
        return None

    def _plan(self, pairs: list[tuple[int, str]]) -> list[tuple[str, list[int]]]:
        """The writes of a batch, in order: each earlier batch whose sending failed and whose
        messages are all here again, under its own key (Strands sends a failed batch again
        with the messages that came after it), then the rest in batches of 100 under new
        keys."""
        where = {n: i for i, (n, _) in enumerate(pairs)}
        plan: list[tuple[str, list[int]]] = []
        taken: set[int] = set()
        for key, group in self._unsure:
            if all(n in where for n, _ in group):
                at = [where[n] for n, _ in group]
                plan.append((key, at))
                taken.update(at)
        rest = [i for i in range(len(pairs)) if i not in taken]
        for start in range(0, len(rest), 100):
            at = rest[start : start + 100]
            first, last = pairs[at[0]][0], pairs[at[-1]][0]
            plan.append((f"strands:{self._run}:{first}-{last}:{len(at)}", at))
        return sorted(plan, key=lambda step: min(step[1]))
