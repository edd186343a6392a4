"""The HTTP API's Lambda REQUEST authorizer (payload 2.0, simple responses)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.api import authorize, logger
from agent_memory.runtime import current_runtime


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return authorize(event, current_runtime())
