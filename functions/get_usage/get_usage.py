"""GET /instances/{instance_id}/agent-memory/{store}/usage: a store's use, day by day."""

from agent_memory.control.usage import parse_day
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, FromDay, InstancePath, StorePath, ToDay
from agent_memory.flows.usage import store_usage
from agent_memory.stores.holding import UsageReport

app = Api()


@app.get(
    STORE_ROUTE + "/usage",
    summary="A store's usage by day",
    tags=["usage"],
    responses=ERROR_RESPONSES,
)
def get_usage(
    instance_id: InstancePath,
    store: StorePath,
    from_: FromDay = None,
    to: ToDay = None,
) -> UsageReport:
    """Each day from ``from`` to ``to`` (at most 366): requests (by route), messages and
    memories added, memories superseded and deleted, background runs and model tokens; and
    what the store holds now. A key limited to actors cannot (403): usage is the whole store's."""
    return store_usage(app.store(instance_id, store), parse_day(from_, "from"), parse_day(to, "to"))


lambda_handler = app.lambda_handler
