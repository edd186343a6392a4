"""POST /keys: a new API key of the caller's organization, limited to some instances, stores or
actors, to reading, and expiring; the organization's admin key only."""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.control.key_models import KeyCreate, KeyCreated
from agent_memory.edge.http_errors import JSON, responses
from agent_memory.edge.resolver import Api

app = Api(admin_only="manages API keys")


@app.post(
    "/keys", summary="Create a scoped API key", tags=["keys"], responses=responses({201: "Created"})
)
def create_key(body: Annotated[KeyCreate, Body()]) -> Response[KeyCreated]:
    """The new key with its secret (``api_key``), shown this once; only its hash is kept."""
    created = app.runtime.control.create_api_key(app.principal.org_id, body)
    return Response(status_code=HTTPStatus.CREATED, content_type=JSON, body=created)


lambda_handler = app.lambda_handler
