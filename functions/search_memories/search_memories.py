"""POST .../{store}/memories/search: find memories by meaning, keyword, or both."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.api import PROVIDER_RESPONSES, STORE_ROUTE, Api, InstancePath, StorePath
from agent_memory.memory_models import SearchRequest, SearchResult

app = Api()


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
    _, memories = app.runtime.memories(app.principal, instance_id, store)
    return SearchResult(memories=memories.search(body))


lambda_handler = app.lambda_handler
