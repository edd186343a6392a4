"""POST /keys: a new API key of the caller's organization, limited to some instances, stores or
actors, to reading, and expiring; the organization's admin key only."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.control.key_models import KeyCreate, KeyCreated
from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import created
from agent_memory.flows.keys import new_key

app = Api(admin_only="manages API keys")


@app.post(
    "/keys", summary="Create a scoped API key", tags=["keys"], responses=responses({201: "Created"})
)
def create_key(body: Annotated[KeyCreate, Body()]) -> Response[KeyCreated]:
    """The new key with its secret (``api_key``), shown this once; only its hash is kept."""
    return created(new_key(app.caller, body))


lambda_handler = app.lambda_handler
