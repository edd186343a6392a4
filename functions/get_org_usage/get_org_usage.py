"""GET /usage: the organization's use, day by day, over every store; the admin key only."""

from datetime import date
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.control.usage import UsageReport
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api

app = Api(admin_only=True)


@app.get("/usage", summary="The organization's usage by day", tags=["usage"],
         responses=ERROR_RESPONSES)  # fmt: skip
def get_org_usage(
    from_: Annotated[
        date | None, Query(alias="from", description="First day (UTC); 30 days before 'to'.")
    ] = None,
    to: Annotated[date | None, Query(description="Last day (UTC), included; today.")] = None,
) -> UsageReport:
    """``GET .../{store}/usage`` summed over every store of the organization (deleted ones
    included, and requests of no store); ``now`` sums the stores of every instance that
    answers."""
    return app.runtime.organization_usage(app.principal, from_, to)


lambda_handler = app.lambda_handler
