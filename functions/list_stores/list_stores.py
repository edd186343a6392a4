"""GET /agent-memory: every store of the caller's organization, with its instance; the
instances that could not be read are listed apart (``agent_memory.stores.listing``)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.flows.stores import organization_stores
from agent_memory.stores.models import MAX_STORE_PAGE, STORE_CURSOR_PATTERN, OrganizationStoreList

app = Api()


@app.get("/agent-memory", summary="List every store", tags=["stores"], responses=ERROR_RESPONSES)
def list_stores(
    cursor: Annotated[str | None, Query(pattern=STORE_CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_STORE_PAGE)] = MAX_STORE_PAGE,
) -> OrganizationStoreList:
    """A page of the stores of the caller's organization, by instance then name, on every
    instance that answered within 5 s; the others in ``unreachable`` with the reason. At most
    ``limit``, fewer when more would pass the answer's byte budget; ``next_cursor`` for the
    next page. 503 only when the control database cannot be reached."""
    return organization_stores(app.caller, cursor, limit)


lambda_handler = app.lambda_handler
