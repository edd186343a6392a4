"""POST .../sessions/{session_id}/extract: run the session's extraction now (202)."""

from http import HTTPStatus

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import SESSION_ROUTE, InstancePath, SessionPath, StorePath, accepted
from agent_memory.flows.sessions import extract_now
from agent_memory.sessions.models import ExtractionQueued

app = Api(idempotent_writes=True)


@app.post(
    SESSION_ROUTE + "/extract",
    summary="Extract a session's memories now",
    tags=["sessions"],
    responses=responses({202: "Queued"}, errors=(HTTPStatus.CONFLICT,)),
)
def extract_session(
    instance_id: InstancePath,
    store: StorePath,
    session_id: SessionPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[ExtractionQueued]:
    """Queue the session's extraction now (202); 409 without a language model, 404 without
    the session."""
    return accepted(extract_now(app.store(instance_id, store), session_id))


lambda_handler = app.lambda_handler
