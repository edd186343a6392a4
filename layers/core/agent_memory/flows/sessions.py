"""The use cases of working memory: adding messages (and arming what they call for), reading a
session or the store's sessions, taking back a session's newest message, forgetting a session,
and asking for its extraction now.

Loads the sessions' service and the scheduler only: no memories, no search index, no numpy.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.background.triggers import request_extraction, schedule_background
from agent_memory.errors import Conflict, SessionNotFound
from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.flows.quota import reserve
from agent_memory.observability import metrics
from agent_memory.sessions.models import (
    EventsRequest,
    EventsResult,
    ExtractionQueued,
    PoppedMessage,
    SessionList,
    SessionView,
)
from agent_memory.stores.idempotency import OnceKey

NO_LANGUAGE_MODEL = (
    "This store has no language model (llm_provider is 'none'), so it extracts nothing; set "
    "llm_provider and llm_model (and llm_api_key or llm_base_url, as the provider needs) on "
    "the store first."
)


def append_events(
    store: StoreHandle, session_id: str, request: EventsRequest, once: OnceKey | None = None
) -> EventsResult:
    """Append ``request``'s messages to the session (once per idempotency key with ``once``),
    then arm its extraction schedule or ask for summarization when the append calls for it.

    A key limited to actors adds only to its actors' sessions (``reach.claim_session``); the
    messages count towards the daily quota and the store's ``messages_added`` first
    (``QuotaExceeded``, nothing written). Metric ``MessagesAdded``. Errors: ``ActorMismatch``,
    ``PayloadTooLarge`` and those of ``Sessions.append_events``."""
    if store.scope is not None:
        actor_id = reach.claim_session(store, session_id, request.actor_id)
        request = request.model_copy(update={"actor_id": actor_id})
    reserve(store, "messages", len(request.events))
    appended = store.sessions.append_events(session_id, request, once)
    if appended.arm_due is not None or appended.fold:
        container = store.container
        schedule_background(container.scheduler, store.sessions, store.target(session_id), appended)
    metrics.add_metric(name="MessagesAdded", unit=MetricUnit.Count, value=appended.result.added)
    return appended.result


def session_view(
    store: StoreHandle, session_id: str, recent: int, before_seq: int | None = None
) -> SessionView:
    """The session's newest ``recent`` messages (before ``before_seq``) within the answer's
    byte budget; ``SessionNotFound`` for a session that does not exist or that the key does
    not reach."""
    reach.reachable_session(store, session_id)
    budget = store.container.answer_budget_bytes
    return store.sessions.get(session_id, recent, before_seq, budget)


def session_list(store: StoreHandle, offset: int, limit: int) -> SessionList:
    """A page of the store's live sessions, most recent first; ``Forbidden`` for a key limited
    to actors (the list is every actor's)."""
    reach.whole_store(store, "list every session")
    return store.sessions.list(offset, limit)


def pop_newest(store: StoreHandle, session_id: str, once: OnceKey | None = None) -> PoppedMessage:
    """Take back the session's newest message in one atomic step (``Sessions.pop``);
    ``SessionNotFound``, ``SessionBusy`` while a background run reads it."""
    reach.reachable_session(store, session_id)
    return store.sessions.pop(session_id, once)


def forget_session(store: StoreHandle, session_id: str) -> None:
    """Forget the session's working memory, told to the store's webhooks
    (``session.deleted``)."""
    reach.reachable_session(store, session_id)
    store.sessions.delete(session_id)
    store.effects.tell("session.deleted", {"session_id": session_id})


def extract_now(store: StoreHandle, session_id: str) -> ExtractionQueued:
    """Queue the session's extraction now: an asynchronous invoke of the background function
    in AWS, due now locally. ``Conflict`` for a store without a language model,
    ``SessionNotFound`` without the session."""
    reach.reachable_session(store, session_id)
    if store.config.llm_provider == "none":
        raise Conflict(NO_LANGUAGE_MODEL)
    container = store.container
    if not request_extraction(store.stores.client, store.config, session_id, container.clock):
        raise SessionNotFound(session_id)
    container.scheduler.run_now(store.target(session_id))
    return ExtractionQueued(session_id=session_id)
