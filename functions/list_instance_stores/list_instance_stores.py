"""GET /instances/{instance_id}/agent-memory: the stores of one instance."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import InstancePath
from agent_memory.flows.stores import instance_store_list
from agent_memory.stores.models import MAX_STORE_PAGE, STORE_CURSOR_PATTERN, StoreList

app = Api()


@app.get(
    "/instances/<instance_id>/agent-memory",
    summary="List an instance's stores",
    tags=["stores"],
    responses=ERROR_RESPONSES,
)
def list_instance_stores(
    instance_id: InstancePath,
    cursor: Annotated[str | None, Query(pattern=STORE_CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_STORE_PAGE)] = MAX_STORE_PAGE,
) -> StoreList:
    """A page of the stores of the instance that the caller's key reaches, by name: at most
    ``limit``, fewer when more would pass the answer's byte budget; ``next_cursor`` for the
    next page."""
    return instance_store_list(app.caller, instance_id, cursor, limit)


lambda_handler = app.lambda_handler
