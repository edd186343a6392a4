"""GET .../{store}/export/sessions: a page of the store's live session ids, for an export."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.transfer import export_session_ids
from agent_memory.models import CURSOR_PATTERN
from agent_memory.sessions.transfer import SessionIdPage

app = Api()

MAX_IDS = 1000


@app.get(
    STORE_ROUTE + "/export/sessions",
    summary="List session ids to export",
    tags=["export and import"],
    responses=ERROR_RESPONSES,
)
def export_sessions(
    instance_id: InstancePath,
    store: StorePath,
    cursor: Annotated[str | None, Query(max_length=20, pattern=CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_IDS)] = 100,
) -> SessionIdPage:
    """About ``limit`` live session ids (in no order; one may be listed twice), from
    ``cursor`` on (the ``next_cursor`` of the page before; none for the first)."""
    return export_session_ids(app.store(instance_id, store), cursor, limit)


lambda_handler = app.lambda_handler
