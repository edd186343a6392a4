"""DELETE .../sessions/{session_id}: forget a session's working memory."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    NOTHING_DELETED,
    SESSION_ROUTE,
    InstancePath,
    SessionPath,
    StorePath,
    no_content,
)
from agent_memory.flows.sessions import forget_session

app = Api(store_not_found_step=NOTHING_DELETED)


@app.delete(
    SESSION_ROUTE,
    summary="Forget a session",
    tags=["sessions"],
    responses=responses({204: "Deleted"}),
)
def delete_session(
    instance_id: InstancePath, store: StorePath, session_id: SessionPath
) -> Response[None]:
    forget_session(app.store(instance_id, store), session_id)
    return no_content()


lambda_handler = app.lambda_handler
