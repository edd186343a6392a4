"""POST .../{store}/keyed-memories/search: keyed memories under a namespace prefix, filtered by
their values, by meaning or newest first."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import KEYED_ROUTE, InstancePath, StorePath
from agent_memory.flows.keyed import keyed_search
from agent_memory.keyed.models import KeyedSearchRequest, KeyedSearchResult

app = Api(reads=True)


@app.post(
    KEYED_ROUTE + "/search",
    summary="Search keyed memories",
    tags=["keyed memories"],
    responses=PROVIDER_RESPONSES,  # and 409 store_too_large past 20,000 read
)
def search_keyed_memories(
    instance_id: InstancePath, store: StorePath, body: Annotated[KeyedSearchRequest, Body()]
) -> KeyedSearchResult:
    """Keyed memories under ``namespace_prefix`` that match ``filter``: most similar first
    with ``query`` or ``query_vector``, else newest first."""
    return keyed_search(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
