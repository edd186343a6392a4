"""GET /instances/{instance_id}/agent-memory/{store}: settings and counts of one store."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.stores.models import StoreCounts, StoreView

app = Api()


@app.get(STORE_ROUTE, summary="Get a store", tags=["stores"], responses=ERROR_RESPONSES)
def get_store(instance_id: InstancePath, store: StorePath) -> StoreView:
    """The store's settings, counts and last extraction."""
    stores = app.runtime.stores(app.principal, instance_id)
    config, sessions, memories = app.runtime.store(app.principal, instance_id, store)
    counts = StoreCounts(
        sessions=sessions.count(),
        memories=memories.count(),
        # A store whose language model was removed extracts nothing: nothing is waiting.
        waiting_for_extraction=sessions.waiting_for_extraction() if sessions.has_model else 0,
    )
    last_at, last_error = sessions.extraction_record()
    return stores.view(config, counts).model_copy(
        update={"last_extraction_at": last_at, "last_extraction_error": last_error}
    )


lambda_handler = app.lambda_handler
