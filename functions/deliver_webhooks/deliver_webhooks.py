"""The webhook delivery function: sends what the outbox holds due (``flows.webhooks``).

Invoked every minute by an EventBridge schedule (template.yaml) and, in the local stack, every
half second by its loop. It works until nothing is due or its time is nearly spent; what is
left waits for the next invocation.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.edge.runtime import current_runtime
from agent_memory.flows.webhooks import deliver_due
from agent_memory.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """The run's counts (``flows.webhooks.deliver_due``); ``DatabaseUnavailable`` when the
    control database cannot be read: Lambda logs it, and the next minute tries again."""
    return deliver_due(current_runtime().webhook_sender, context.get_remaining_time_in_millis())
