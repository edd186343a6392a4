"""GET .../{store}/export/profiles: actors' profiles with their histories, page by page."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.transfer import profile_export_page
from agent_memory.memories.profile_models import ProfileExportPage

app = Api()


@app.get(
    STORE_ROUTE + "/export/profiles",
    summary="Export profiles",
    tags=["export and import"],
    responses=ERROR_RESPONSES,
)
def export_profiles(
    instance_id: InstancePath,
    store: StorePath,
    cursor: Annotated[str | None, Query(min_length=1, max_length=300)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
) -> ProfileExportPage:
    """About ``limit`` actors' profiles with every field's history, from ``cursor`` on (the
    ``next_cursor`` of the page before; none for the first), fewer when more would pass the
    answer's byte budget."""
    return profile_export_page(app.store(instance_id, store), cursor, limit)


lambda_handler = app.lambda_handler
