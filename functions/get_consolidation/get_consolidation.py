"""GET .../{store}/consolidations/{consolidation_id}: one run with its steps."""

from agent_memory.consolidation.models import Consolidation
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CONSOLIDATION_ROUTE, ConsolidationPath, InstancePath, StorePath
from agent_memory.flows.consolidation import consolidation_view

app = Api()


@app.get(
    CONSOLIDATION_ROUTE,
    summary="Get a consolidation run",
    tags=["consolidation"],
    responses=ERROR_RESPONSES,
)
def get_consolidation(
    instance_id: InstancePath, store: StorePath, consolidation_id: ConsolidationPath
) -> Consolidation:
    """The run: status, counts, model calls and tokens, each step's memories before and after."""
    return consolidation_view(app.store(instance_id, store), consolidation_id)


lambda_handler = app.lambda_handler
