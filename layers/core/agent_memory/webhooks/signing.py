"""Secrets and signatures of webhook deliveries, with the ``standardwebhooks`` package (the
specification's reference library), so that a receiver verifying with it (or any library of
the specification) accepts what is sent here."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

from agent_memory.webhooks.models import SECRET_BYTES, SECRET_PREFIX


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and the base64 of ``SECRET_BYTES`` random bytes
    (``secrets.token_bytes``)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def signed_headers(secret: str, webhook_id: str, moment: datetime, body: str) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: ``webhook-id``, ``webhook-timestamp``
    (whole seconds since the epoch of ``moment``, UTC) and ``webhook-signature`` (``v1,`` and
    the base64 HMAC-SHA256 of ``id.timestamp.body``), and the JSON content type."""
    moment = moment.astimezone(UTC)
    signature = Webhook(secret).sign(webhook_id, moment, body)
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signature,
    }
