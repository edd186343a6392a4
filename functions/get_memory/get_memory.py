"""GET .../memories/{memory_id}: one memory with its versions, newest first."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import MEMORY_ROUTE, InstancePath, MemoryPath, StorePath
from agent_memory.flows.memories import memory_view
from agent_memory.memories.models import MemoryView

app = Api()


@app.get(MEMORY_ROUTE, summary="Get a memory", tags=["memories"], responses=ERROR_RESPONSES)
def get_memory(instance_id: InstancePath, store: StorePath, memory_id: MemoryPath) -> MemoryView:
    """One memory with its versions, newest first; 404 ``memory_not_found``."""
    return memory_view(app.store(instance_id, store), memory_id)


lambda_handler = app.lambda_handler
