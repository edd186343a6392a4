"""GET .../sessions/{session_id}: a session's summary and recent messages."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import SESSION_ROUTE, InstancePath, SessionPath, StorePath
from agent_memory.flows.sessions import session_view
from agent_memory.models import DEFAULT_RECENT, MAX_RECENT
from agent_memory.sessions.models import SessionView

app = Api()


@app.get(SESSION_ROUTE, summary="Get a session", tags=["sessions"], responses=ERROR_RESPONSES)
def get_session(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    recent: Annotated[int, Query(ge=1, le=MAX_RECENT)] = DEFAULT_RECENT,
    before_seq: Annotated[
        int | None,
        Query(
            ge=1,
            le=2**53,  # a seq is a sorted set score, exact up to 2**53
            description="Only messages before this seq: the next page back, after an answer "
            "with messages_omitted or to read a session from its newest messages back.",
        ),
    ] = None,
) -> SessionView:
    """The newest ``recent`` messages (before ``before_seq``), within the answer budget."""
    return session_view(app.store(instance_id, store), session_id, recent, before_seq)


lambda_handler = app.lambda_handler
