"""Google ADK's session and memory services on a KiviDB store: ``KiviDBSessionService`` (a
``BaseSessionService``) and ``KiviDBMemoryService`` (a ``BaseMemoryService``).

``pip install "kividb-memory[adk]"``. An ADK session ``(app_name, user_id, session_id)`` is a
KiviDB session of the actor ``user_id`` (``session_key``), each ADK ``Event`` one of its
messages: its role (``user`` for the user's events, ``tool`` for function responses,
``assistant`` for the rest), the author as the message's ``name``, its text parts as
``content`` (what recall, summaries and extraction read), its time as ``created_at``, and the
event itself (id, invocation id, function calls and responses, actions, state delta) as the
message's ``item``, so ``get_session`` gives back the events as they were. Each event is
written with the idempotency key ``adk:<session>:<event id>``, so an append ADK retries is kept
once. State is kept in keyed memories under ``("adk", app_name, ...)``: the session's own
state with the session's record, ``app:`` state once per app, ``user:`` state once per app and
user (``temp:`` state is never kept, as in ADK). The memory service's memories are the actor's
long-term memories: ``add_session_to_memory`` adds what the store does not hold yet of the
session and starts the store's extraction (its language model), ``search_memory`` is the
store's search for the user. Mapping and limits: docs/integrations.md, "Google ADK".

What does not map: an event whose JSON is over 32,000 characters (a message's ``item`` limit)
is refused (``ValueError``, nothing written); a store with a language model folds older
messages into a summary once there are more than ``summarize_after``, and folded events are no
longer returned (give ADK sessions a store without one, or a ``summarize_after`` above the
longest session); state is written whole per scope after each event that changes it, so two
processes changing the same app's or user's state at once keep the later write (ADK's
in-memory service has the same race; its database service a transaction); a stale session
object is not refused (``StaleSessionError``); ``app_name`` scopes sessions and state but not
long-term memories, which are the user's in the store: give each ADK app a store of its own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.genai import types

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.errors import NotFoundError
from kividb_memory.integrations.sessions import (
    AnyStore,
    async_store_from_env,
    forget,
    label,
    read_messages,
    session_id_of,
)
from kividb_memory.models import Message, SearchMode

MAX_ITEM_CHARS = 32_000
"""The API's limit of a message's ``content``, and of its ``item`` as compact JSON."""
PAGE = 1000


def session_key(app_name: str, user_id: str, session_id: str) -> str:
    """The KiviDB session id of an ADK session: ``adk:<app>:<user>:<session>``, or ``adk:h:``
    and a SHA-256 of the three when one is outside the API's alphabet (``session_id_of``)."""
    return session_id_of("adk", app_name, user_id, session_id)


def event_message(event: Event) -> dict[str, Any]:
    """The message of one event (see the module). ``ValueError`` when the event's JSON is over
    the API's 32,000 characters."""
    item = event.model_dump(mode="json", exclude_none=True)
    if len(json.dumps(item, ensure_ascii=False, separators=(",", ":"))) > MAX_ITEM_CHARS:
        raise ValueError(
            f"event {event.id} is over {MAX_ITEM_CHARS} characters as JSON, the most a KiviDB "
            "message keeps: cut the tool output or the text that makes it so large"
        )
    parts = event.content.parts if event.content and event.content.parts else []
    if event.author == "user":
        role = "user"
    elif any(p.function_response is not None for p in parts):
        role = "tool"
    else:
        role = "assistant"
    message: dict[str, Any] = {
        "role": role,
        "name": event.author[:64] if event.author else None,
        "item": item,
        "created_at": datetime.fromtimestamp(event.timestamp, UTC).isoformat(),
    }
    text = "\n".join(p.text for p in parts if p.text and not p.thought)
    if text:
        message["content"] = text[:MAX_ITEM_CHARS]
    return message


def _event(message: Message) -> Event | None:
    """The event a message keeps; None for one another client added without it."""
    if message.item is None or "invocation_id" not in message.item:
        return None
    return Event.model_validate(message.item)


class _State:
    """The three kinds of state an ADK app keeps, as keyed memories."""

    def __init__(self, store: AnyStore) -> None:
        self.store = store

    @staticmethod
    def sessions_namespace(app_name: str, user_id: str | None) -> tuple[str, ...]:
        base = ("adk", label(app_name), "sessions")
        return base if user_id is None else (*base, label(user_id))

    async def get(self, namespace: Sequence[str], key: str) -> dict[str, Any] | None:
        try:
            view = await self.store.call("get_keyed_memory", tuple(namespace), key)
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise
            return None
        return dict(view.value)

    async def put(self, namespace: Sequence[str], key: str, value: Mapping[str, Any]) -> None:
        await self.store.call("put_keyed_memory", tuple(namespace), key, value, index=False)

    async def app(self, app_name: str) -> dict[str, Any]:
        found = await self.get(("adk", label(app_name), "app-state"), "state")
        return dict(found["state"]) if found else {}

    async def user(self, app_name: str, user_id: str) -> dict[str, Any]:
        found = await self.get(("adk", label(app_name), "user-state"), user_id)
        return dict(found["state"]) if found else {}

    async def change(self, app_name: str, user_id: str, delta: Mapping[str, Any]) -> None:
        """Apply the ``app:`` and ``user:`` parts of a state delta (the session part is the
        session record's)."""
        parts = _session_util.extract_state_delta(dict(delta))
        if parts["app"]:
            state = {**await self.app(app_name), **parts["app"]}
            await self.put(("adk", label(app_name), "app-state"), "state", {"state": state})
        if parts["user"]:
            state = {**await self.user(app_name, user_id), **parts["user"]}
            value = {"state": state}
            await self.put(("adk", label(app_name), "user-state"), user_id, value)

    async def merged(self, session: Session) -> Session:
        """The session with the app's and the user's state in its state, prefixed."""
        for key, value in (await self.app(session.app_name)).items():
            session.state[State.APP_PREFIX + key] = value
        for key, value in (await self.user(session.app_name, session.user_id)).items():
            session.state[State.USER_PREFIX + key] = value
        return session


def _record(session: Session) -> dict[str, Any]:
    return {
        "app_name": session.app_name,
        "user_id": session.user_id,
        "id": session.id,
        "state": _session_util.make_json_safe_state(
            {k: v for k, v in session.state.items() if not k.startswith(("app:", "user:", "temp:"))}
        ),
        "last_update_time": session.last_update_time,
    }


class KiviDBSessionService(BaseSessionService):
    """ADK sessions, their events and state in a KiviDB store (see the module). ``store``: a
    ``StoreClient`` (its calls in a worker thread) or an ``AsyncStoreClient``; None for one from
    ``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE``. Errors:
    ADK's ``AlreadyExistsError`` for a session id taken, ``ValueError`` for an event too large
    or appended to a session that does not exist, the client's (``ApiError`` and its kinds,
    ``ApiConnectionError``) for the rest."""

    def __init__(self, *, store: StoreClient | AsyncStoreClient | None = None) -> None:
        self._store = AnyStore(store if store is not None else async_store_from_env())
        self._state = _State(self._store)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session (id: ``session_id``, else a new UUID) with ``state`` (its ``app:``
        and ``user:`` keys go to the app's and the user's state)."""
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        namespace = self._state.sessions_namespace(app_name, user_id)
        if await self._state.get(namespace, session_id) is not None:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        await self._state.change(app_name, user_id, state or {})
        parts = _session_util.extract_state_delta(state or {})
        session = Session(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=parts["session"],
            last_update_time=time.time(),
        )
        await self._state.put(namespace, session_id, _record(session))
        return await self._state.merged(session.model_copy(deep=True))

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (``config``: the newest ``num_recent_events``, those
        at or after ``after_timestamp``) and merged state; None when there is none."""
        session_id = session_id.strip()
        record = await self._state.get(
            self._state.sessions_namespace(app_name, user_id), session_id
        )
        if record is None:
            return None
        limit = config.num_recent_events if config else None
        events: list[Event] = []
        if limit != 0:
            key = session_key(app_name, user_id, session_id)
            messages = await read_messages(self._store.call, key, limit)
            events = [e for e in map(_event, messages) if e is not None]
        if config and config.after_timestamp is not None:
            events = [e for e in events if e.timestamp >= config.after_timestamp]
        session = Session.model_validate({**record, "events": events})
        return await self._state.merged(session)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (of one user when given), without events, oldest update first."""
        namespace = self._state.sessions_namespace(app_name, user_id)
        sessions: list[Session] = []
        offset = 0
        while True:
            page = await self._store.call(
                "search_keyed_memories", namespace, limit=PAGE, offset=offset
            )
            for view in page.items:
                if len(view.namespace) == 4:  # ("adk", app, "sessions", user)
                    session = Session.model_validate(view.value)
                    sessions.append(await self._state.merged(session))
            if page.next_offset is None:  # a page may be cut short by bytes: follow it
                break
            offset = page.next_offset
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Forget the session, its events and its own state (the app's and user's stay)."""
        try:
            await self._store.call(
                "delete_keyed_memory",
                self._state.sessions_namespace(app_name, user_id),
                session_id,
            )
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise
        await forget(self._store.call, session_key(app_name, user_id, session_id))

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without ``user:``."""
        return await self._state.user(app_name, user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Apply the event to ``session`` (ADK's own rules: ``temp:`` state only in memory)
        and keep it: the message (idempotent per event id) and the state it changes."""
        if event.partial:
            return event
        namespace = self._state.sessions_namespace(session.app_name, session.user_id)
        if await self._state.get(namespace, session.id) is None:
            raise ValueError(f"Session {session.id} not found.")
        event = await super().append_event(session, event)
        message = event_message(event)
        key = session_key(session.app_name, session.user_id, session.id)
        await self._store.call(
            "add_events",
            key,
            [message],
            actor_id=session.user_id,
            idempotency_key=f"adk:{key}:{event.id}"[:255],
        )
        session.last_update_time = event.timestamp
        if event.actions and event.actions.state_delta:
            await self._state.change(session.app_name, session.user_id, event.actions.state_delta)
        await self._state.put(namespace, session.id, _record(session))
        return event


class KiviDBMemoryService(BaseMemoryService):
    """ADK's long-term memory as the user's memories in a KiviDB store (see the module).
    ``store``: as ``KiviDBSessionService``'s. ``search_mode``: ``hybrid`` (default),
    ``semantic`` or ``keyword`` (a store without an embedding model can search only by
    keyword); ``limit``: the most memories a search gives (the API's default 10 when None).
    Errors: the client's."""

    def __init__(
        self,
        *,
        store: StoreClient | AsyncStoreClient | None = None,
        search_mode: SearchMode = "hybrid",
        limit: int | None = None,
    ) -> None:
        self._store = AnyStore(store if store is not None else async_store_from_env())
        self.search_mode: SearchMode = search_mode
        self.limit = limit

    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session's events the store does not hold yet (a session kept by
        ``KiviDBSessionService`` is there already) and start its extraction now."""
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add ``events`` (those not kept yet) to the session's messages, then start the
        store's extraction of the session. ``custom_metadata`` is not used."""
        key = session_key(app_name, user_id, session_id or "memory")
        kept = {
            str(m.item.get("id"))
            for m in await read_messages(self._store.call, key, None)
            if m.item is not None
        }
        for event in events:
            if event.partial or event.id in kept:
                continue
            await self._store.call(
                "add_events",
                key,
                [event_message(event)],
                actor_id=user_id,
                idempotency_key=f"adk:{key}:{event.id}"[:255],
            )
        try:
            await self._store.call("extract", key)
        except NotFoundError as exc:
            if exc.code != "session_not_found":
                raise  # no event at all: nothing to extract

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Keep each entry's text as a memory of the user (redacted and deduplicated as every
        memory; the store embeds it), its author, time and ``custom_metadata`` as metadata."""
        for entry in memories:
            parts = entry.content.parts or []
            text = "\n".join(p.text for p in parts if p.text)
            if not text:
                continue
            metadata = {
                **dict(custom_metadata or {}),
                **entry.custom_metadata,
                "adk_app": app_name,
                **({"author": entry.author} if entry.author else {}),
            }
            await self._store.call(
                "add_memory",
                text,
                actor_id=user_id,
                metadata=metadata,
                occurred_at=entry.timestamp,
            )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories best first for ``query``, each a ``MemoryEntry`` whose content
        is the memory's text, ``id`` its id, ``timestamp`` when it happened (else when it was
        kept) and ``custom_metadata`` its score, type and metadata."""
        found = await self._store.call(
            "search", query, mode=self.search_mode, actor_id=user_id, limit=self.limit
        )
        entries = [
            MemoryEntry(
                content=types.Content(role="user", parts=[types.Part(text=m.text)]),
                id=m.id,
                author=str(m.metadata.get("author")) if m.metadata.get("author") else None,
                timestamp=(m.occurred_at or m.created_at).isoformat(),
                custom_metadata={"score": m.score, "type": m.type, **m.metadata},
            )
            for m in found.memories
        ]
        return SearchMemoryResponse(memories=entries)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget the user's memory ``memory_id``; ``ValueError`` when the user has none
        with that id (another user's is not touched)."""
        if memory_id is None:
            raise ValueError("memory_id: the id search_memory gave")
        try:
            memory = await self._store.call("get_memory", memory_id)
        except NotFoundError as exc:
            raise ValueError(f"the user {user_id} has no memory {memory_id}") from exc
        if memory.actor_id != user_id:
            raise ValueError(f"the user {user_id} has no memory {memory_id}")
        await self._store.call("delete_memory", memory_id)


__all__ = ["KiviDBMemoryService", "KiviDBSessionService", "event_message", "session_key"]
