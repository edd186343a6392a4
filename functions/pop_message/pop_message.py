"""POST .../sessions/{session_id}/pop: take back the session's newest message."""

from http import HTTPStatus

from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import SESSION_ROUTE, InstancePath, SessionPath, StorePath
from agent_memory.flows.sessions import pop_newest
from agent_memory.sessions.models import PoppedMessage

app = Api(idempotent_writes=True)


@app.post(
    SESSION_ROUTE + "/pop",
    summary="Take back a session's newest message",
    tags=["sessions"],
    responses=responses(errors=(HTTPStatus.CONFLICT,)),
)
def pop_message(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> PoppedMessage:
    """Remove the session's newest message and answer it (null when the session keeps none),
    in one atomic step; its number is given to the next message. 404 without the session,
    409 ``session_busy`` (with ``Retry-After``) while a background run reads it."""
    return pop_newest(app.store(instance_id, store), session_id, app.once)


lambda_handler = app.lambda_handler
