"""PUT .../{store}/import/sessions/{session_id}: write an exported session (a page of its
messages at a time) under its own id, sequence numbers and times."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    CREATE_STORE_FIRST,
    STORE_ROUTE,
    InstancePath,
    SessionPath,
    StorePath,
)
from agent_memory.flows.transfer import import_session_page
from agent_memory.sessions.transfer import SessionImport, SessionImported

app = Api(store_not_found_step=CREATE_STORE_FIRST)


@app.put(
    STORE_ROUTE + "/import/sessions/<session_id>",
    summary="Import a session",
    tags=["export and import"],
    responses=WRITE_RESPONSES,
)
def import_session(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    body: Annotated[SessionImport, Body()],
) -> SessionImported:
    """Write the session's state and this page of its messages (idempotent: a page sent twice
    is kept once). When its messages are not all read by extraction and the store has a
    language model, its extraction is armed as after an append. 409 when another session holds
    the id or a sequence number holds another message; 422 naming the field when its cursors,
    times, ``pending`` or a message's ``seq`` contradict the rest of the session, or when its
    time is up."""
    return import_session_page(app.store(instance_id, store), session_id, body)


lambda_handler = app.lambda_handler
