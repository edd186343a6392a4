"""Webhooks: the endpoints a store names, the events they get, the stored delivery and what a
client sees of it.

Deliveries follow the Standard Webhooks specification (https://www.standardwebhooks.com/,
"Webhook specification"): a JSON body ``{"type", "timestamp", "data"}``; headers
``webhook-id`` (the same on every attempt), ``webhook-timestamp`` (seconds since the epoch of
the attempt) and ``webhook-signature`` (``v1,`` and the base64 HMAC-SHA256 of
``id.timestamp.body`` under the secret's bytes); a secret is ``whsec_`` and base64 of 24 to 64
random bytes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, StringConstraints, ValidationInfo, field_validator

from agent_memory.models import Model, View
from agent_memory.providers.endpoint_urls import check_endpoint_url

EventType = Literal[
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
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
"""The events an endpoint may ask for, in the order the docs list them."""
MAX_ENDPOINTS = 5
"""Endpoints per store (the issue's limit; Svix and Zep allow more per application)."""
MAX_URL_CHARS = 2000
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
"""Random bytes of a new secret (256 bits, the HMAC-SHA256 key size)."""
_FRAGMENT_OR_SPACE = re.compile(r"[#\s]")


class WebhookEndpoint(Model):
    """One endpoint of a store: ``{"url": "https://...", "events": ["memory.created"]}``.

    The URL is ``https://`` with a public host (with the local stack's
    KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1, also ``http://`` and private addresses): the rule of a
    custom provider's base URL, checked when saved
    (``providers.endpoint_urls.check_endpoint_url``) and again at every delivery, on the
    addresses connected to. A query string is kept (a receiver may authenticate by it);
    credentials and fragments are refused. The scheme and address
    rule is applied when validated with a context (``{"allow_private_endpoints": bool}``), as
    the store's settings are when saved."""

    url: Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_CHARS)]
    events: Annotated[list[EventType], Field(min_length=1, max_length=len(EVENT_TYPES))]

    @field_validator("url")
    @classmethod
    def _public_https(cls, value: str, info: ValidationInfo) -> str:
        if _FRAGMENT_OR_SPACE.search(value) or not value.isprintable():
            raise ValueError("must not hold spaces, control characters or a fragment ('#')")
        context = info.context
        # The address rule needs to know whether the stack allows private endpoints: it is
        # applied where the store's settings are validated with that context
        # (``stores.registry``), not on a request body alone; a stored setting was checked
        # when saved, and each delivery checks the addresses it connects to.
        if context is None or context.get("stored"):
            return value
        check_endpoint_url(
            "url",
            value,
            allow_private=bool(context.get("allow_private_endpoints")),
            allow_query=True,
        )
        return value

    @field_validator("events")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("names an event twice")
        return value

    def host(self) -> str:
        """The URL's host, which logs and errors name instead of the whole URL."""
        return urlsplit(self.url).hostname or "?"

    def redacted(self) -> WebhookEndpoint:
        """This endpoint as a key that cannot change the store's settings sees it: its query
        string (which may hold the receiver's token) as ``***``."""
        return self.model_copy(update={"url": redacted_url(self.url)})


def redacted_url(url: str) -> str:
    """``url`` with its query string, if any, replaced by ``***``."""
    base, mark, _ = url.partition("?")
    return f"{base}?***" if mark else url


Webhooks = Annotated[list[WebhookEndpoint], Field(max_length=MAX_ENDPOINTS)]


class WebhookSecret(View):
    """``POST .../webhooks/secret``: the store's new signing secret, shown only here."""

    secret: str = Field(description="'whsec_' and the base64 of 32 random bytes.")
    created_at: datetime


class Delivery(View):
    """A delivery as kept in the control database (``webhooks.outbox``): where it goes and how
    it went, never what the store remembers. The body (the exact JSON sent and signed) of an
    event about the store's data is kept in the store's own keyspace
    (``StoreKeys.webhook_body(event_id)``), so it goes with the store; only ``store.deleted``,
    which holds nothing but the store's name, carries its ``body`` here (dropped once
    settled). ``secret`` is the store's sealed secret when the event happened
    (``providers.secrets.seal``, field ``webhook_secret``), so that ``store.deleted`` is signed
    after its store is gone."""

    id: str
    event_id: str
    org_id: str
    instance_id: str
    store: str
    incarnation: str
    event: str
    url: str
    body: str | None = None
    secret: str | None = None
    created_ms: int
    attempts: int = 0
    state: Literal["pending", "delivered", "failed"] = "pending"
    last_attempt_ms: int | None = None
    last_status: int | None = None
    last_error: str | None = None
    next_ms: int | None = None


class DeliveryView(View):
    """One delivery as ``GET .../webhooks/deliveries`` shows it: ``status`` is ``pending``
    (to be tried again at ``next_attempt_at``), ``delivered`` (a 2xx answer) or ``failed``
    (no 2xx answer in 24 hours); ``last_status_code`` the receiver's last HTTP status (None
    when it gave none: refused, timed out) and ``last_error`` why the last attempt failed."""

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


class DeliveryList(View):
    """The store's last deliveries (at most ``outbox.LOG_SIZE``), newest first."""

    deliveries: list[DeliveryView]
