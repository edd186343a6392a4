"""GET .../{store}/sessions: a page of live sessions, most recent first."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.sessions import session_list
from agent_memory.models import DEFAULT_PAGE, MAX_OFFSET, MAX_PAGE
from agent_memory.sessions.models import SessionList

app = Api()


@app.get(
    STORE_ROUTE + "/sessions", summary="List sessions", tags=["sessions"], responses=ERROR_RESPONSES
)
def list_sessions(
    instance_id: InstancePath,
    store: StorePath,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
) -> SessionList:
    """A page of live sessions, most recent first."""
    return session_list(app.store(instance_id, store), offset, limit)


lambda_handler = app.lambda_handler
