"""GET .../{store}/export/memories: a page of every live memory with every field, its
versions and its vector, for an export."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.transfer import memory_export_page
from agent_memory.memories.transfer_models import (
    MAX_CURSOR_CHARS,
    MAX_IMPORT_MEMORIES,
    MemoryExportPage,
)

app = Api()


@app.get(
    STORE_ROUTE + "/export/memories",
    summary="Export memories",
    tags=["export and import"],
    responses=ERROR_RESPONSES,
)
def export_memories(
    instance_id: InstancePath,
    store: StorePath,
    cursor: Annotated[str | None, Query(min_length=3, max_length=MAX_CURSOR_CHARS)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_IMPORT_MEMORIES)] = MAX_IMPORT_MEMORIES,
) -> MemoryExportPage:
    """About ``limit`` live memories, current and superseded, actor by actor, from ``cursor``
    on (the ``next_cursor`` of the page before; none for the first), fewer when more would
    pass the answer's byte budget."""
    return memory_export_page(app.store(instance_id, store), cursor, limit)


lambda_handler = app.lambda_handler
