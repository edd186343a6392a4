"""POST .../sessions/{session_id}/events: add a turn's messages to a session."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader, once_of
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    CREATE_STORE_FIRST,
    SESSION_ROUTE,
    InstancePath,
    SessionPath,
    StorePath,
)
from agent_memory.observability import metrics
from agent_memory.sessions.models import EventsRequest, EventsResult

app = Api(store_not_found_step=CREATE_STORE_FIRST, idempotent_writes=True)


@app.post(
    SESSION_ROUTE + "/events",
    summary="Add messages to a session",
    tags=["sessions"],
    responses=WRITE_RESPONSES,
)
def add_events(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    body: Annotated[EventsRequest, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> EventsResult:
    """Append the events' messages (200 ``EventsResult``); then arm the session's extraction
    schedule or ask for summarization when the append calls for it. 409 ``actor_mismatch``."""
    handle = app.runtime.store(app.principal, instance_id, store)
    if handle.scope is not None:
        body = body.model_copy(update={"actor_id": handle.claim_session(session_id, body.actor_id)})
    app.runtime.reserve(app.principal, handle, "messages", len(body.events))
    result = handle.add_events(session_id, body, once_of(app))
    metrics.add_metric(name="MessagesAdded", unit=MetricUnit.Count, value=result.added)
    return result


lambda_handler = app.lambda_handler
