"""What the session adapters share: the store from the environment, a session's messages read
whole page by page, and a framework's items as events (role and text for prompts, the item kept
as given).

A framework's item goes to the API as an event whose ``item`` is the item itself (kept and
returned as the same JSON value, ``docs/routes.md``, "Structured message items") and whose
``content`` is its text when it has one, so that recall, summaries and extraction read what was
said rather than JSON. Events go in batches of at most ``MAX_EVENTS_PER_CALL`` (the API's own
limit); each batch is one idempotent write.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, cast

from kividb_memory.async_client import AsyncMemoryClient, AsyncStoreClient
from kividb_memory.client import MemoryClient, StoreClient
from kividb_memory.errors import NotFoundError
from kividb_memory.models import Message, PoppedMessage, SessionView

INSTANCE_ENV = "KIVIDB_INSTANCE"
STORE_ENV = "KIVIDB_STORE"
MAX_EVENTS_PER_CALL = 100
"""The API's limit of events in one ``POST .../events`` (413 above it)."""
NO_SESSION = "session_not_found"
"""The 404 code of a session that does not exist (an empty history); any other 404 (the store,
the instance) is raised."""
PAGE = 1000
"""The most messages one ``GET .../sessions/{id}`` gives (``recent`` at most 1000)."""

T = TypeVar("T")


def _place() -> tuple[str, str]:
    instance, store = os.environ.get(INSTANCE_ENV), os.environ.get(STORE_ENV)
    if not instance or not store:
        raise ValueError(
            f"pass store= (MemoryClient().store(instance, name)), or set {INSTANCE_ENV} and "
            f"{STORE_ENV} (with KIVIDB_API_URL and KIVIDB_API_KEY)"
        )
    return instance, store


def store_from_env() -> StoreClient:
    """A ``StoreClient`` of the store ``KIVIDB_INSTANCE`` / ``KIVIDB_STORE`` names, through a
    ``MemoryClient`` made from ``KIVIDB_API_URL`` and ``KIVIDB_API_KEY``. ``ValueError`` when
    one is missing."""
    instance, store = _place()
    return MemoryClient().store(instance, store)


def async_store_from_env() -> AsyncStoreClient:
    """The async twin of :func:`store_from_env`."""
    instance, store = _place()
    return AsyncMemoryClient().store(instance, store)


class AnyStore:
    """Calls a ``StoreClient`` or an ``AsyncStoreClient`` from async code (a sync client's calls
    run in a worker thread), and a ``StoreClient`` from sync code (an ``AsyncStoreClient``'s
    connections belong to its event loop: ``TypeError``)."""

    def __init__(self, store: StoreClient | AsyncStoreClient) -> None:
        self.store = store

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The answer of the store client's method ``name`` called with the arguments given;
        the client's errors (``ApiError`` and its kinds, ``ApiConnectionError``)."""
        method = getattr(self.store, name)
        if isinstance(self.store, AsyncStoreClient):
            return await method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    def call_sync(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``call`` from sync code: ``TypeError`` for an ``AsyncStoreClient``."""
        if isinstance(self.store, AsyncStoreClient):
            raise TypeError(
                "this call is synchronous: pass a StoreClient (MemoryClient().store(...)), or "
                "use the async methods with an AsyncStoreClient"
            )
        return getattr(self.store, name)(*args, **kwargs)

    async def call_now(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``call_sync`` shaped as ``call``: the helpers below take either, and with this one
        they never wait on an event loop, so ``run_now`` runs them from sync code."""
        return self.call_sync(name, *args, **kwargs)


def run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of ``coroutine``, one of the helpers below given ``AnyStore.call_now``: it
    finishes without suspending, so it is stepped once, here, with no event loop (a sync
    method may be called from a thread that runs one)."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return cast(T, finished.value)
    coroutine.close()
    raise RuntimeError("a helper waited on an event loop; give it AnyStore.call_now")


async def read_messages(
    call: Callable[..., Awaitable[Any]], session_id: str, limit: int | None
) -> list[Message]:
    """The session's newest ``limit`` kept messages (all of them when ``None``), oldest first,
    read page by page (``before_seq``); ``[]`` for a session that does not exist. ``call`` is
    ``AnyStore.call``."""
    found: list[Message] = []
    before: int | None = None
    while limit is None or len(found) < limit:
        want = PAGE if limit is None else min(PAGE, limit - len(found))
        try:
            view: SessionView = await call(
                "get_session", session_id, recent=want, before_seq=before
            )
        except NotFoundError as exc:
            if exc.code != NO_SESSION:
                raise  # a missing store or instance is the caller's to know
            return []
        found = view.messages + found
        if not view.messages or (len(view.messages) >= want and view.messages[0].seq <= 1):
            break
        if len(view.messages) < want and not view.messages_omitted:
            break
        before = view.messages[0].seq
    return found


async def pop(call: Callable[..., Awaitable[Any]], session_id: str) -> Message | None:
    """Take back the session's newest message: it, or ``None`` when there is none (no message,
    no session)."""
    try:
        popped: PoppedMessage = await call("pop_message", session_id)
    except NotFoundError as exc:
        if exc.code != NO_SESSION:
            raise
        return None
    return popped.message


async def forget(call: Callable[..., Awaitable[Any]], session_id: str) -> None:
    """Delete the session; one that does not exist is already forgotten (a store or instance
    that does not exist is ``NotFoundError``)."""
    try:
        await call("delete_session", session_id)
    except NotFoundError as exc:
        if exc.code != NO_SESSION:
            raise


_SAFE = re.compile(r"^[A-Za-z0-9._@-]+$")


def session_id_of(framework: str, *parts: str) -> str:
    """The KiviDB session id of a framework's conversation named by ``parts``:
    ``<framework>:<part>:<part>...`` when every part is of the API's alphabet (letters, digits,
    ``._@-``) and it fits in 256 characters, else ``<framework>:h:`` and a SHA-256 of the parts
    (so two conversations never share a session)."""
    readable = ":".join((framework, *parts))
    if all(_SAFE.match(part) for part in parts) and len(readable) <= 256:
        return readable
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"{framework}:h:{digest}"


def label(text: str) -> str:
    """``text`` as one keyed-memory namespace label: ``%`` and ``.`` percent-encoded (a label
    may not hold ``.``), so any text is a label and two texts are never the same label."""
    return text.replace("%", "%25").replace(".", "%2E")


def batches(events: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """``events`` in order, in batches of at most ``MAX_EVENTS_PER_CALL``."""
    return [
        list(events[i : i + MAX_EVENTS_PER_CALL])
        for i in range(0, len(events), MAX_EVENTS_PER_CALL)
    ]
