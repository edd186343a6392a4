"""GET .../{store}/consolidations: a page of the store's consolidation runs, newest first."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.consolidation.models import ConsolidationList
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.consolidation import consolidation_list
from agent_memory.models import DEFAULT_PAGE, MAX_OFFSET, MAX_PAGE, SESSION_ID_PATTERN

app = Api()


@app.get(
    STORE_ROUTE + "/consolidations",
    summary="List consolidation runs",
    tags=["consolidation"],
    responses=ERROR_RESPONSES,
)
def list_consolidations(
    instance_id: InstancePath,
    store: StorePath,
    actor_id: Annotated[str | None, Query(pattern=SESSION_ID_PATTERN)] = None,
    status: Annotated[
        str | None,
        Query(max_length=100, description="Only runs of these statuses, comma-separated."),
    ] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
) -> ConsolidationList:
    """The store's runs (of one actor, of some statuses), newest first, without their steps."""
    return consolidation_list(app.store(instance_id, store), actor_id, status, offset, limit)


lambda_handler = app.lambda_handler
