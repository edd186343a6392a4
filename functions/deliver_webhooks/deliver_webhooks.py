"""The webhook delivery function: sends what the outbox holds due (``webhooks.delivery``).

Invoked every minute by an EventBridge schedule (template.yaml) and, in the local stack, every
half second by its loop. It works until nothing is due or its time is nearly spent; what is
left waits for the next invocation.
"""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.edge.runtime import current_runtime
from agent_memory.observability import logger, metrics

RESERVE_SECONDS = 15.0
"""Left of the function's time when it starts no new batch: one batch's attempts (10 s)."""


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Send what is due until nothing is or the function's time is nearly spent; the run's
    counts (``DeliveryReport`` without its messages). ``DatabaseUnavailable`` when the control
    database cannot be read: Lambda logs it, and the next minute tries again."""
    try:
        seconds = context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS
        report = current_runtime().webhook_sender.deliver_due(max(seconds, 1.0))
        for name, value in (
            ("WebhookAttempts", report.attempts),
            ("WebhooksDelivered", report.delivered),
            ("WebhookAttemptsFailed", report.failed_attempts),
            ("WebhooksGivenUp", report.given_up),
        ):
            if value:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        answer = {k: v for k, v in asdict(report).items() if k != "errors"}
        if report.attempts:
            # Our own messages (a host and a status), never a URL or a body.
            logger.info("webhook deliveries", extra={**answer, "errors": report.errors[:10]})
        return answer
    finally:
        if is_metrics_disabled():
            metrics.clear_metrics()
