"""DELETE .../{store}/keyed-memories?namespace=a.b&key=k: forget one keyed memory."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    KEYED_ROUTE,
    NOTHING_DELETED,
    InstancePath,
    StorePath,
    no_content,
)
from agent_memory.flows.keyed import delete_keyed
from agent_memory.keyed.models import MAX_KEY_CHARS, namespace_from_query

app = Api(store_not_found_step=NOTHING_DELETED)


@app.delete(
    KEYED_ROUTE,
    summary="Forget a keyed memory",
    tags=["keyed memories"],
    responses=responses({204: "Deleted"}),
)
def delete_keyed_memory(
    instance_id: InstancePath,
    store: StorePath,
    namespace: Annotated[
        str, Query(min_length=1, max_length=6000, description="The labels joined by '.'.")
    ],
    key: Annotated[str, Query(min_length=1, max_length=MAX_KEY_CHARS)],
) -> Response[None]:
    """Forget the keyed memory under ``namespace`` and ``key`` (204); 404
    ``keyed_memory_not_found``."""
    delete_keyed(app.store(instance_id, store), namespace_from_query(namespace), key)
    return no_content()


lambda_handler = app.lambda_handler
