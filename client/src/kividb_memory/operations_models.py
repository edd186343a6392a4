"""The store's webhooks as the client sends and reads them: the ``webhooks`` setting,
``POST .../webhooks/secret`` and ``GET .../webhooks/deliveries``; the conventions of
``kividb_memory.models`` hold (it re-exports these)."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from kividb_memory.model_bases import Answer

WebhookEvent = Literal[
    "extraction.completed",
    "extraction.failed",
    "memory.created",
    "memory.updated",
    "memory.superseded",
    "memory.deleted",
    "session.deleted",
    "profile.updated",
    "consolidation.proposed",
    "consolidation.completed",
    "consolidation.failed",
    "store.deleted",
]


class WebhookEndpoint(Answer):
    """One endpoint of a store's ``webhooks`` setting (sent in ``put_store`` and read back):
    its URL and the events it is sent."""

    url: str
    events: list[WebhookEvent]


class WebhookSecret(Answer):
    """A store's new webhook signing secret (``whsec_`` and base64), shown only once."""

    secret: str = Field(repr=False)
    created_at: datetime


class DeliveryView(Answer):
    """One webhook delivery: ``pending`` (tried again at ``next_attempt_at``), ``delivered``
    or ``failed`` (no 2xx answer in 24 hours)."""

    webhook_id: str
    event: str
    url: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at: datetime
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None


class DeliveryList(Answer):
    """A store's last webhook deliveries (at most 100), newest first."""

    deliveries: list[DeliveryView]
