"""The use cases of webhooks besides a store's settings: the store's delivery log, and sending
what the outbox holds due (the delivery function's run)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.observability import logger, metrics
from agent_memory.webhooks.models import DeliveryList, redacted_url

if TYPE_CHECKING:
    from agent_memory.webhooks.delivery import Sender


def delivery_log(store: StoreHandle) -> DeliveryList:
    """The store's last webhook deliveries (``webhooks.outbox.Outbox.log``); ``Forbidden`` for
    a key limited to actors (they are every actor's events). A key that cannot change the
    store's settings sees the URLs without their query strings."""
    reach.whole_store(store, "read the store's webhook deliveries")
    listed = store.container.outbox.log(store.instance.org_id, store.instance_id, store.config.name)
    if store.scope is None or store.scope.manages_stores:
        return listed
    shown = [d.model_copy(update={"url": redacted_url(d.url)}) for d in listed.deliveries]
    return listed.model_copy(update={"deliveries": shown})


RESERVE_SECONDS = 15.0
"""Left of the delivery function's time when it starts no new batch: one batch's attempts
(10 s)."""


def deliver_due(sender: Sender, remaining_ms: int) -> dict[str, int]:
    """Send what is due until nothing is or the function's time (``remaining_ms``) is nearly
    spent, ``RESERVE_SECONDS`` before its end (``Sender.deliver_due``),
    with metrics ``WebhookAttempts``, ``WebhooksDelivered``, ``WebhookAttemptsFailed`` and
    ``WebhooksGivenUp``, and a log line of the run's counts (hosts and statuses, never a URL
    or a body); the run's counts (``DeliveryReport`` without its messages).
    ``DatabaseUnavailable`` when the control database cannot be read."""
    try:
        seconds = max(remaining_ms / 1000 - RESERVE_SECONDS, 1.0)
        report = sender.deliver_due(seconds)
    finally:
        if is_metrics_disabled():
            # Powertools keeps disabled metrics and prints them every 100 values; drop them.
            metrics.clear_metrics()
    for name, value in (
        ("WebhookAttempts", report.attempts),
        ("WebhooksDelivered", report.delivered),
        ("WebhookAttemptsFailed", report.failed_attempts),
        ("WebhooksGivenUp", report.given_up),
    ):
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    counts: dict[str, int] = {k: v for k, v in asdict(report).items() if k != "errors"}
    if report.attempts:
        logger.info("webhook deliveries", extra={**counts, "errors": report.errors[:10]})
    return counts
