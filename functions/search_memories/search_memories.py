"""POST .../{store}/memories/search: find memories by meaning, keyword, or both."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.memories import memory_search
from agent_memory.memories.models import SearchRequest, SearchResult

app = Api(reads=True, last_read_settings=True)


@app.post(
    STORE_ROUTE + "/memories/search",
    summary="Search memories",
    tags=["memories"],
    responses=PROVIDER_RESPONSES,
)
def search_memories(
    instance_id: InstancePath, store: StorePath, body: Annotated[SearchRequest, Body()]
) -> SearchResult:
    """Memories best first for the query, by meaning, keyword or both."""
    return memory_search(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
