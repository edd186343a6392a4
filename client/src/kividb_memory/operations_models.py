"""Answers of the routes that operate a store for many tenants: usage (``GET .../usage``,
``GET /usage``) and webhooks (the store's ``webhooks`` setting, ``POST .../webhooks/secret``,
``GET .../webhooks/deliveries``), as the client reads them; the conventions of
``kividb_memory.models`` hold (it re-exports these)."""

from datetime import date as Day, datetime
from typing import Literal

from pydantic import Field

from kividb_memory.model_bases import Answer

WebhookEvent = Literal[
    "extraction.completed",
    "extraction.failed",
    "memory.created",
    "memory.superseded",
    "memory.deleted",
    "session.deleted",
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


class UsageDay(Answer):
    """One UTC day of use: requests (and by route), messages and memories added, memories
    superseded and deleted, background runs, and model tokens as the providers reported them."""

    date: Day
    requests: int
    requests_by_route: dict[str, int]
    messages_added: int
    memories_added: int
    memories_superseded: int
    memories_deleted: int
    extraction_runs: int
    summarization_runs: int
    llm_input_tokens: int
    llm_output_tokens: int
    embedding_tokens: int


class Holding(Answer):
    """What a store (or the organization's stores) holds now; ``bytes`` is Redis's estimate."""

    sessions: int
    messages: int
    memories: int
    bytes: int


class UsageReport(Answer):
    """Usage by day, oldest first, and what is held now."""

    days: list[UsageDay]
    now: Holding
