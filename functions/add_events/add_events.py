"""POST .../sessions/{session_id}/events: add a turn's messages to a session."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    CREATE_STORE_FIRST,
    SESSION_ROUTE,
    InstancePath,
    SessionPath,
    StorePath,
)
from agent_memory.flows.sessions import append_events
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
    return append_events(app.store(instance_id, store), session_id, body, app.once)


lambda_handler = app.lambda_handler
