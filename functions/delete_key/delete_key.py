"""DELETE /keys/{key_id}: revoke an API key of the caller's organization at once; the
organization's admin key only."""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path

from agent_memory.control.key_models import KEY_ID_PATTERN
from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import no_content
from agent_memory.flows.keys import revoke_key

app = Api(admin_only="manages API keys")


@app.delete(
    "/keys/<key_id>",
    summary="Revoke an API key",
    tags=["keys"],
    responses=responses({204: "Revoked"}, errors=(HTTPStatus.CONFLICT,)),
)
def delete_key(key_id: Annotated[str, Path(pattern=KEY_ID_PATTERN)]) -> Response[None]:
    """Revoke the key (204): its next request is a 401. 404 ``key_not_found``; 409 for the
    key this request is made with (revoke it with another admin key)."""
    revoke_key(app.caller, key_id)
    return no_content()


lambda_handler = app.lambda_handler
