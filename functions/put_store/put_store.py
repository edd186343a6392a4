"""PUT /instances/{instance_id}/agent-memory/{store}: create or change a store."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from agent_memory.api import ERROR_RESPONSES, JSON, Api
from agent_memory.models import INSTANCE_ID_PATTERN, STORE_NAME_PATTERN, StorePut, StoreView

app = Api()


@app.put(
    "/instances/<instance_id>/agent-memory/<store>",
    summary="Create or change a store",
    tags=["stores"],
    responses={200: {"description": "Changed"}, 201: {"description": "Created"}, **ERROR_RESPONSES},
)
def put_store(
    instance_id: Annotated[str, Path(pattern=INSTANCE_ID_PATTERN)],
    store: Annotated[str, Path(pattern=STORE_NAME_PATTERN)],
    body: Annotated[StorePut, Body()],
) -> Response[StoreView]:
    stores = app.runtime.stores(app.principal, instance_id)
    config, created = stores.put(store, body)
    return Response(status_code=201 if created else 200, content_type=JSON, body=stores.view(config))


lambda_handler = app.lambda_handler
