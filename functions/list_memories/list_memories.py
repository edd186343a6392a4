"""GET .../{store}/memories: a page of memories, newest first (filters actor_id and type;
current memories unless include_superseded or as_of)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.api import ERROR_RESPONSES, STORE_ROUTE, Api, InstancePath, StorePath
from agent_memory.clock import to_ms
from agent_memory.models import (
    DEFAULT_PAGE,
    MAX_OFFSET,
    MAX_PAGE,
    SESSION_ID_PATTERN,
    MemoryList,
    UtcDatetime,
)
from agent_memory.selection import Selection

app = Api()


@app.get(
    STORE_ROUTE + "/memories", summary="List memories", tags=["memories"], responses=ERROR_RESPONSES
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
) -> MemoryList:
    """A page of memories, newest first, optionally one actor's and one type's; current ones
    unless ``include_superseded`` or ``as_of``."""
    _, memories = app.runtime.memories(app.principal, instance_id, store)
    selection = Selection(
        include_superseded=include_superseded,
        as_of=to_ms(as_of) if as_of is not None else None,
    )
    return memories.page(offset, limit, actor_id, type, selection)


lambda_handler = app.lambda_handler
