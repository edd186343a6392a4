"""DELETE /instances/{instance_id}/agent-memory/{store}: the store and everything it keeps."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    NOTHING_DELETED,
    STORE_ROUTE,
    InstancePath,
    StorePath,
    no_content,
)
from agent_memory.flows.stores import remove_store

app = Api(store_not_found_step=NOTHING_DELETED)


@app.delete(
    STORE_ROUTE,
    summary="Delete a store and everything it keeps",
    tags=["stores"],
    responses=responses({204: "Deleted"}),
)
def delete_store(instance_id: InstancePath, store: StorePath) -> Response[None]:
    """Delete the store and everything it keeps (204); a key limited to stores or actors
    cannot (403, or a stranger's 404 outside its scope)."""
    remove_store(app.caller, instance_id, store)
    return no_content()


lambda_handler = app.lambda_handler
