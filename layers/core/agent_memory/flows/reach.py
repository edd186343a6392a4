"""What the calling key may do inside a store it reaches (``agent_memory.scopes``): which
actors it names, whether it may read or write the whole store, and whether a session or a
memory it names is one of its actors'. The use cases call these first; a handler never does
(``tests/unit/test_use_case_guard.py``).

A key limited to actors gets a stranger's answer for another actor's session or memory (the
404 of one that does not exist); a whole-store read or a write it may not make is 403
``forbidden``.
"""

from __future__ import annotations

from agent_memory.errors import (
    ActorMismatch,
    MemoryNotFound,
    SessionNotFound,
    SupersededNotFound,
)
from agent_memory.flows.handle import StoreHandle
from agent_memory.scopes import actor_for, require_whole_store, require_write


def actor(store: StoreHandle, actor_id: str | None, field: str = "actor_id") -> str | None:
    """``scopes.actor_for`` with the calling key's scope: the actor the request names, or the
    key's one actor when it names none."""
    return actor_for(store.scope, actor_id, field)


def whole_store(store: StoreHandle, what: str) -> None:
    """``scopes.require_whole_store``: ``Forbidden`` for a key limited to actors asking for
    ``what``, which reaches every actor of the store."""
    require_whole_store(store.scope, what)


def writes(store: StoreHandle, what: str) -> None:
    """``scopes.require_write``: ``Forbidden`` for a read-only key asking a read to change
    something (``what``)."""
    require_write(store.scope, what)


def reachable_session(store: StoreHandle, session_id: str) -> None:
    """``SessionNotFound`` (a stranger's answer) when the calling key is limited to actors and
    the session's actor is not one of them; one more read, for such keys only."""
    actors = store.actors
    if actors is not None and store.sessions.owner(session_id) not in actors:
        raise SessionNotFound(session_id)


def reachable_memory(store: StoreHandle, memory_id: str) -> None:
    """``MemoryNotFound`` (a stranger's answer) when the calling key is limited to actors and
    the memory's actor is not one of them."""
    actors = store.actors
    if actors is not None and store.memories.reader.owner(memory_id) not in actors:
        raise MemoryNotFound(memory_id)


def reachable_superseded(store: StoreHandle, memory_id: str) -> None:
    """``SupersededNotFound`` (the answer for a memory that does not exist) when the calling
    key is limited to actors and the memory ``supersedes`` names is not one of theirs."""
    try:
        reachable_memory(store, memory_id)
    except MemoryNotFound as exc:
        raise SupersededNotFound(memory_id) from exc


def claim_session(store: StoreHandle, session_id: str, actor_id: str | None) -> str | None:
    """The ``actor_id`` an append of the calling key carries (``actor``); for a key limited to
    actors, an existing session must be one of its actors' (else ``ActorMismatch`` without
    naming the owner), so that such a key never adds to another's session."""
    actor_id = actor(store, actor_id)
    if store.actors is None:
        return actor_id
    try:
        owner = store.sessions.owner(session_id)
    except SessionNotFound:
        return actor_id
    if owner != actor_id:
        raise ActorMismatch(session_id, None, str(actor_id))
    return actor_id
