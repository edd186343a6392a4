"""The background function: extraction and summarization of one session
(``flows.background.run_event``).

Invoked with ``{"kind": "extraction", "instance_id", "store", "session_id"}`` by the session's
one-shot EventBridge Scheduler schedule, by ``POST .../extract`` (an asynchronous invoke) and by
an append that made the session outgrow ``summarize_after`` (locally, by the local scheduler,
with the same event).
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.edge.runtime import current_runtime
from agent_memory.flows.background import run_event
from agent_memory.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The run's counts and outcome (``flows.background.run_event``)."""
    return run_event(current_runtime(), event, context.get_remaining_time_in_millis())
