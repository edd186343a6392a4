"""GET .../{store}/memories: a page of memories, newest first (filters actor_id, type, topics,
metadata and time ranges; current memories unless include_superseded or as_of)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.memories import memory_list
from agent_memory.memories.models import MemoryFilters, MemoryList, MemoryPage
from agent_memory.models import DEFAULT_PAGE, MAX_OFFSET, MAX_PAGE, SESSION_ID_PATTERN, UtcDatetime

app = Api()


@app.get(
    STORE_ROUTE + "/memories",
    summary="List memories",
    tags=["memories"],
    responses=WRITE_RESPONSES,  # and 409 store_too_large, for filters without actor_id
)
def list_memories(
    instance_id: InstancePath,
    store: StorePath,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    actor_id: Annotated[str | None, Query(pattern=SESSION_ID_PATTERN)] = None,
    type: Annotated[str | None, Query(min_length=1, max_length=40)] = None,
    include_superseded: Annotated[
        bool, Query(description="Also memories that another memory replaced.")
    ] = False,
    as_of: Annotated[
        UtcDatetime | None,
        Query(description="What was current at this time (ISO 8601; see docs/routes.md)."),
    ] = None,
    topics: Annotated[
        str | None,
        Query(
            max_length=1000,
            description="Only memories with at least one of these topics, comma-separated.",
        ),
    ] = None,
    metadata: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="A JSON object: only memories whose metadata has each of its top-level "
            'keys with an equal value, e.g. {"team":"ops"}.',
        ),
    ] = None,
    created_after: Annotated[
        UtcDatetime | None, Query(description="Only memories kept at or after this time.")
    ] = None,
    created_before: Annotated[
        UtcDatetime | None, Query(description="Only memories kept before this time.")
    ] = None,
    occurred_after: Annotated[
        UtcDatetime | None, Query(description="Only memories whose event happened at or after.")
    ] = None,
    occurred_before: Annotated[
        UtcDatetime | None, Query(description="Only memories whose event happened before this.")
    ] = None,
) -> MemoryList:
    """A page of memories, newest first, among those the filters select; current ones
    unless ``include_superseded`` or ``as_of``."""
    return memory_list(
        app.store(instance_id, store),
        MemoryPage(offset, limit, actor_id, type),
        MemoryFilters(
            include_superseded=include_superseded,
            as_of=as_of,
            topics=topics,
            metadata=metadata,
            created_after=created_after,
            created_before=created_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        ),
    )


lambda_handler = app.lambda_handler
