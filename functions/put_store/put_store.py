"""PUT /instances/{instance_id}/agent-memory/{store}: create or change a store."""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath, created
from agent_memory.flows.stores import create_or_change_store
from agent_memory.stores.models import StorePut, StoreView

app = Api()


@app.put(
    STORE_ROUTE,
    summary="Create or change a store",
    tags=["stores"],
    responses=responses({200: "Changed", 201: "Created"}, errors=(HTTPStatus.CONFLICT,)),
)
def put_store(
    instance_id: InstancePath, store: StorePath, body: Annotated[StorePut, Body()]
) -> Response[StoreView]:
    """Create the store (201) or change its settings (200); a key limited to stores or actors
    cannot (403, or a stranger's 404 outside its scope)."""
    return created(*create_or_change_store(app.caller, instance_id, store, body))


lambda_handler = app.lambda_handler
