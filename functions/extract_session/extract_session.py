"""POST .../sessions/{session_id}/extract: run the session's extraction now (202)."""

from http import HTTPStatus

from aws_lambda_powertools.event_handler import Response

from agent_memory.background.scheduler import ExtractionTarget
from agent_memory.background.work import request_extraction
from agent_memory.database.client import redis_client
from agent_memory.edge.http_errors import JSON, responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import SESSION_ROUTE, InstancePath, SessionPath, StorePath
from agent_memory.errors import Conflict, SessionNotFound
from agent_memory.sessions.models import ExtractionQueued

app = Api()


@app.post(
    SESSION_ROUTE + "/extract",
    summary="Extract a session's memories now",
    tags=["sessions"],
    responses=responses({202: "Queued"}, errors=(HTTPStatus.CONFLICT,)),
)
def extract_session(
    instance_id: InstancePath, store: StorePath, session_id: SessionPath
) -> Response[ExtractionQueued]:
    """Queue the session's extraction now (202); 409 without a language model, 404 without
    the session."""
    runtime = app.runtime
    instance = runtime.control.instance(app.principal.org_id, instance_id)
    config, _ = runtime.sessions(app.principal, instance_id, store)
    if config.llm_provider == "none":
        raise Conflict(
            "This store has no language model (llm_provider is 'none'), so it extracts "
            "nothing; set llm_provider and llm_model (and llm_api_key or llm_base_url, as the "
            "provider needs) on the store first."
        )
    if not request_extraction(redis_client(instance.url), config, session_id, runtime.clock):
        raise SessionNotFound(session_id)
    # An asynchronous invoke of the background function in AWS; due now locally.
    runtime.scheduler.run_now(ExtractionTarget(instance_id, store, session_id))
    return Response(
        status_code=HTTPStatus.ACCEPTED,
        content_type=JSON,
        body=ExtractionQueued(session_id=session_id),
    )


lambda_handler = app.lambda_handler
