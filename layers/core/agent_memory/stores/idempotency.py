"""A store's records of idempotent writes: what a write sent with an ``Idempotency-Key``
answered, kept 24 hours, so that the same request sent again answers the same and writes
nothing more (the header of draft-ietf-httpapi-idempotency-key-header; the semantics of
Stripe's idempotent requests).

One record per key, in the store's database under the store's incarnation
(``StoreKeys.idempotency``): keys are per organization (an instance is one organization's)
and per store, survive a restart of the stack, and go when the store does. A record is
``IdempotencyRecord`` JSON, first *running* (a claim with a random token, held for
``LEASE_MS``), then *answered* (the status and the exact body of the first answer, for
``RECORD_SECONDS``). The claim is one ``SET NX``: of two calls with one key, exactly one runs.
A claim is finished or released only by its own holder (a compare-and-set on the whole stored
value, ``_FINISH``), so a holder whose lease ran out never overwrites a later one's record.

What is not covered (docs/routes.md, "Idempotent writes"): a process that dies after its write
and before the record (a Lambda killed at its time-out) leaves the claim running until its lease
ends; a retry then gets 409 ``idempotency_key_in_progress`` until then, and runs the write
again after.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import pydantic
import redis

from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys
from agent_memory.database.scripts import FINISHES_WRITE, load_script
from agent_memory.errors import IdempotencyKeyInProgress, IdempotencyKeyReused
from agent_memory.models import said

IDEMPOTENCY_KEY_PATTERN = said(
    r"^[ \t]*[\x21-\x7e]{1,255}[ \t]*$",
    "1 to 255 visible ASCII characters, without spaces between them",
)
ONCE_CONTEXT = "idempotency_once"
"""Where the HTTP middleware (``edge.idempotency``) leaves a keyed request's ``OnceKey`` in the
resolver's context, for a use case whose write records its own outcome (``Api.once``)."""
"""An ``Idempotency-Key`` header: 1 to 255 visible ASCII characters (``!`` to ``~``; no space
inside), with the spaces or tabs around a field value that are not part of it (RFC 9110,
section 5.5); ``key_of`` gives the key."""


def key_of(header: str) -> str:
    """The key an ``Idempotency-Key`` header value names: without the spaces and tabs around
    it."""
    return header.strip(" \t")


RECORD_SECONDS = 24 * 3600
"""How long an answered record is kept: a key is spent for 24 hours after its answer."""

LEASE_MS = 60_000
"""How long a running claim holds its key when its holder never finishes it (killed): longer
than any writing function may run (template.yaml: 10 s for the API, 30 s for an import)."""

WAIT_SECONDS = 5.0
"""How long a call whose key is held by a running write waits for that write's answer before it
answers 409 ``idempotency_key_in_progress``."""

POLL_SECONDS = 0.05
"""The interval at which a waiting call reads the record again."""

# KEYS: the record; ARGV: the claim as stored, then the answer ('' to release) and its PX.
# The holder's own claim only: a claim whose lease ran out may be another call's by now.
_FINISH = (
    FINISHES_WRITE
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) return 1 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""
)


class IdempotencyRecord(pydantic.BaseModel):
    """A stored record: ``fingerprint`` (the request's SHA-256, hex), the claim's ``token``, and
    once answered the answer's ``status``, ``content_type`` and ``body`` (exactly as sent)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    fingerprint: str
    token: str
    status: int | None = None
    content_type: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class OnceKey:
    """What a write's own script needs to do it once per key: the key's ``digest``
    (``key_digest``) and the request's ``fingerprint``. The middleware's record stops a second
    run while the first is running or after it answered; this one, written in the same atomic
    step as the write, stops a second write after a first whose answer was lost (a 503 frees
    the middleware's record)."""

    digest: str
    fingerprint: str


@dataclass(frozen=True)
class Claim:
    """This call holds the key: it runs the write, then ``finish``es or ``release``s."""

    name: str
    stored: str


@dataclass(frozen=True)
class Answered:
    """The key's request was answered already: send this answer again."""

    status: int
    content_type: str
    body: str


def key_digest(idempotency_key: str) -> str:
    """SHA-256 (hex) of the key's ASCII bytes: the record's name holds this, never the key. (A
    scoped API key's keys carry its key id after a NUL: ``edge.idempotency``.)"""
    return hashlib.sha256(idempotency_key.encode("ascii")).hexdigest()


class IdempotencyRecords:
    """The records of one store incarnation (``keys``) on ``client`` (text replies). Errors:
    ``DatabaseUnavailable`` from every call; ``begin`` as it says."""

    def __init__(
        self,
        client: redis.Redis,
        keys: StoreKeys,
        *,
        wait_seconds: float = WAIT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._wait = wait_seconds
        self._sleep = sleep
        self._finish = load_script(client, _FINISH)

    def begin(self, idempotency_key: str, fingerprint: str) -> Claim | Answered:
        """Claim ``idempotency_key`` for the request whose SHA-256 is ``fingerprint``, or the
        answer of the first request sent with it. ``IdempotencyKeyReused`` when that request
        was another one; ``IdempotencyKeyInProgress`` when it is still running after
        ``wait_seconds`` (the record is read every ``POLL_SECONDS`` meanwhile)."""
        name = self._keys.idempotency(key_digest(idempotency_key))
        claim = IdempotencyRecord(fingerprint=fingerprint, token=secrets.token_hex(16))
        stored = claim.model_dump_json()
        deadline = time.monotonic() + self._wait
        while True:
            with database_errors():
                if self._redis.set(name, stored, nx=True, px=LEASE_MS):
                    return Claim(name, stored)
                found = self._redis.get(name)
            if found is None:
                continue  # released (or expired) between the two: claim it again
            record = IdempotencyRecord.model_validate_json(found)
            if record.fingerprint != fingerprint:
                raise IdempotencyKeyReused()
            if record.status is not None:
                return Answered(record.status, record.content_type or "", record.body or "")
            if time.monotonic() >= deadline:
                raise IdempotencyKeyInProgress()
            self._sleep(POLL_SECONDS)

    def finish(self, claim: Claim, status: int, content_type: str, body: str) -> None:
        """Keep the answer of ``claim``'s request for ``RECORD_SECONDS``; nothing when the claim
        is no longer this call's (its lease ran out)."""
        running = IdempotencyRecord.model_validate_json(claim.stored)
        answered = running.model_copy(
            update={"status": status, "content_type": content_type, "body": body}
        )
        with database_errors():
            self._finish(
                keys=[claim.name],
                args=[claim.stored, answered.model_dump_json(), RECORD_SECONDS * 1000],
            )

    def release(self, claim: Claim) -> None:
        """Give the key back (the write failed and wrote nothing that counts): the next call
        with it runs afresh."""
        with database_errors():
            self._finish(keys=[claim.name], args=[claim.stored, "", 0])
