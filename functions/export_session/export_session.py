"""GET .../{store}/export/sessions/{session_id}: a session's whole state and a page of its
messages, for an export."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, SessionPath, StorePath
from agent_memory.flows.transfer import session_export_page
from agent_memory.sessions.transfer import MAX_EXPORT_MESSAGES, SessionExport

app = Api()


@app.get(
    STORE_ROUTE + "/export/sessions/<session_id>",
    summary="Export a session",
    tags=["export and import"],
    responses=ERROR_RESPONSES,
)
def export_session(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    after_seq: Annotated[int, Query(ge=0, le=2**53)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_EXPORT_MESSAGES)] = MAX_EXPORT_MESSAGES,
) -> SessionExport:
    """The session's state (summary, counters, extraction cursor and outcome) and its
    messages after ``after_seq``, at most ``limit`` (fewer when more would pass the answer's
    byte budget), oldest first (``next_after_seq`` for the next page). 404
    ``session_not_found``."""
    return session_export_page(app.store(instance_id, store), session_id, after_seq, limit)


lambda_handler = app.lambda_handler
