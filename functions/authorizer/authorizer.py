"""The HTTP API's Lambda REQUEST authorizer (payload 2.0, simple responses)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.edge.auth import authorize
from agent_memory.edge.runtime import current_runtime
from agent_memory.observability import logger


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return authorize(event, current_runtime())
