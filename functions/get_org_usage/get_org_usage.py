"""GET /usage: the organization's use, day by day, over every store; the admin key only."""

from agent_memory.control.usage import parse_day
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import FromDay, ToDay
from agent_memory.flows.usage import organization_usage
from agent_memory.stores.holding import UsageReport

app = Api(admin_only="reads the whole organization's usage")


@app.get(
    "/usage", summary="The organization's usage by day", tags=["usage"], responses=ERROR_RESPONSES
)
def get_org_usage(
    from_: FromDay = None,
    to: ToDay = None,
) -> UsageReport:
    """``GET .../{store}/usage`` summed over every store of the organization (deleted ones
    included, and requests of no store); ``now`` sums the stores of every instance that
    answers."""
    return organization_usage(app.caller, parse_day(from_, "from"), parse_day(to, "to"))


lambda_handler = app.lambda_handler
