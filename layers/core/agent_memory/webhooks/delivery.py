"""The delivery side: take what the outbox holds due, send each signed, and keep its outcome.

Each attempt is one ``POST`` of the delivery's body, signed with the store's secret as it was
when the event happened (``signing.signed_headers``), through the process's one HTTP client
(``providers.network.shared_http``): redirects are not followed, and every address connected to
must be public unless the stack allows private endpoints (the rule of custom providers, checked
on the addresses themselves, so a name that resolves elsewhere after it was saved is refused).
A 2xx answer delivers; anything else (another status, a refusal, no answer within ``TIMEOUT``
seconds) is a failed attempt, tried again on the outbox's schedule. Attempts run on
``THREADS`` threads, the organizations served in turn, at most ``PER_ORG`` at once for one
organization and ``PER_ENDPOINT`` to one of its endpoints (host and port), so receivers that
hang delay only their own organization's deliveries. What a receiver answers is never read
beyond its status, nor kept, nor logged.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from agent_memory.clock import Clock, to_ms
from agent_memory.errors import AgentMemoryError, EndpointRefused
from agent_memory.providers.network import CallDeadline, current_call, shared_http
from agent_memory.providers.secrets import Cipher, KeyPlace, unseal
from agent_memory.webhooks.bodies import EventGone
from agent_memory.webhooks.models import Delivery
from agent_memory.webhooks.outbox import Outbox, next_attempt_ms
from agent_memory.webhooks.signing import signed_headers

TIMEOUT = 10.0
"""Seconds one attempt may take, from name lookup to status line (Svix and Stripe give a
receiver about 15 s; 10 s keeps a batch well inside the outbox's lease)."""
CONNECT_TIMEOUT = 5.0
THREADS = 32
"""Attempts at once. An attempt waits on its receiver, not on this process, so threads are
cheap; enough of them that a few organizations' hanging receivers leave the others room."""
PER_ORG = 8
"""Attempts at once for one organization's endpoints: receivers that hang take at most this
many threads, so they delay only their own organization's deliveries while fewer than
``THREADS / PER_ORG`` organizations have this many hanging at once."""
PER_ENDPOINT = 4
"""Attempts at once to one endpoint (an organization's host and port): a receiver that hangs
takes at most this many of its organization's threads, and a healthy one with a backlog still
gets several at once."""
BUSY_ENDPOINT_DELAY_MS = 250
"""How much later a delivery claimed while its endpoint is busy is due again."""


@dataclass
class DeliveryReport:
    """What one ``deliver_due`` did: attempts made, deliveries delivered, attempts that
    failed, and deliveries given up (their 24 hours over)."""

    attempts: int = 0
    delivered: int = 0
    failed_attempts: int = 0
    given_up: int = 0
    errors: list[str] = field(default_factory=list)


class Sender:
    """Sends deliveries of ``outbox``, unsealing secrets with ``cipher`` and reading the bodies
    kept in their stores with ``bodies`` (``webhooks.bodies.read_body`` of the delivery's
    store, ``EventGone`` when there is nothing to send any more); ``allow_private`` admits
    ``http://`` and private addresses (the local stack and tests only); ``timeout`` is one
    attempt's seconds."""

    def __init__(
        self,
        outbox: Outbox,
        cipher: Cipher,
        clock: Clock,
        bodies: Callable[[Delivery], str],
        *,
        allow_private: bool = False,
        timeout: float = TIMEOUT,
    ) -> None:
        self._outbox = outbox
        self._cipher = cipher
        self._clock = clock
        self._bodies = bodies
        self._allow_private = allow_private
        self._timeout = timeout

    def deliver_due(self, seconds: float = 50.0) -> DeliveryReport:
        """Attempt what is due until nothing is due now or ``seconds`` have passed (attempts
        under way then are finished, within ``timeout``). Deliveries are claimed only as
        threads free up, the organizations in turn (``Outbox.claim``), at most ``PER_ORG``
        attempts at once for one organization and ``PER_ENDPOINT`` to one of its endpoints (one
        more is given back, due a quarter of a second later): receivers that hang delay only
        their own organization's deliveries. Errors: ``DatabaseUnavailable`` from the outbox; a
        receiver's failure is the delivery's, never raised."""
        report = DeliveryReport()
        end = time.monotonic() + seconds
        running: dict[Future[Delivery], tuple[str, tuple[str, str], int]] = {}
        per_org: Counter[str] = Counter()
        per_endpoint: Counter[tuple[str, str]] = Counter()
        with ThreadPoolExecutor(THREADS, thread_name_prefix="webhook") as pool:
            while True:
                claimed = 0
                if time.monotonic() < end and len(running) < THREADS:
                    busy = {org: PER_ORG - n for org, n in per_org.items() if n}
                    batch = self._outbox.claim(THREADS - len(running), room=PER_ORG, busy=busy)
                    claimed = len(batch)
                    for delivery in batch:
                        org = delivery.org_id
                        endpoint = (org, urlsplit(delivery.url).netloc.lower())
                        if per_endpoint[endpoint] >= PER_ENDPOINT:
                            self._outbox.release(delivery, BUSY_ENDPOINT_DELAY_MS)
                            continue
                        per_org[org] += 1
                        per_endpoint[endpoint] += 1
                        future = pool.submit(self._guarded, delivery)
                        running[future] = (org, endpoint, delivery.attempts)
                if not running:
                    if not claimed or time.monotonic() >= end:
                        break
                    continue
                done, _ = wait(running, timeout=0.05, return_when=FIRST_COMPLETED)
                for future in done:
                    org, endpoint, attempts_before = running.pop(future)
                    per_org[org] -= 1
                    per_endpoint[endpoint] -= 1
                    self._settled(future.result(), attempts_before, report)
        return report

    def _guarded(self, delivery: Delivery) -> Delivery:
        """``attempt``, with an unexpected error (a bug) logged and counted as a failed
        attempt, so that one delivery never leaves the others of its run leased."""
        try:
            return self.attempt(delivery)
        except Exception:  # noqa: BLE001 - the top of an attempt: logged with its trace
            from agent_memory.observability import logger

            logger.exception("webhook attempt failed on an internal error")
            now_ms = to_ms(self._clock.now())
            done = delivery.model_copy(
                update={
                    "attempts": delivery.attempts + 1,
                    "last_attempt_ms": now_ms,
                    "last_status": None,
                    "last_error": "internal error (logged)",
                },
            )
            following = next_attempt_ms(done, now_ms)
            state = "pending" if following is not None else "failed"
            return done.model_copy(update={"state": state, "next_ms": following})

    def _settled(self, delivery: Delivery, attempts_before: int, report: DeliveryReport) -> None:
        self._outbox.settle(delivery)
        report.attempts += delivery.attempts - attempts_before
        if delivery.state == "delivered":
            report.delivered += 1
            return
        report.failed_attempts += 1
        report.given_up += delivery.state == "failed"
        if delivery.last_error:
            report.errors.append(delivery.last_error)

    def attempt(self, delivery: Delivery) -> Delivery:
        """One attempt of ``delivery``; the delivery as it leaves it (attempts, state, status,
        error, next attempt)."""
        started = self._clock.now()
        status: int | None = None
        error: str | None = None
        try:
            body = self._body(delivery)
        except _Gone as exc:
            return delivery.model_copy(
                update={
                    "state": "failed",
                    "next_ms": None,
                    "last_error": str(exc),
                    "body": None,
                    "secret": None,
                },
            )
        except _AttemptFailed as exc:
            body, error = None, str(exc)
        if body is not None:
            try:
                status = self._post(delivery, body)
                if not 200 <= status < 300:
                    error = f"the endpoint answered HTTP {status}"
            except _AttemptFailed as exc:
                error = str(exc)
        now_ms = to_ms(self._clock.now())
        done = delivery.model_copy(
            update={
                "attempts": delivery.attempts + 1,
                "last_attempt_ms": to_ms(started),
                "last_status": status,
                "last_error": error,
            }
        )
        if error is None:
            return done.model_copy(update={"state": "delivered", "next_ms": None})
        following = next_attempt_ms(done, now_ms)
        state = "pending" if following is not None else "failed"
        return done.model_copy(update={"state": state, "next_ms": following})

    def _body(self, delivery: Delivery) -> str:
        """The body to send: the delivery's own (``store.deleted``) or its store's; ``_Gone``
        when there is nothing to send any more, ``_AttemptFailed`` when the store's database
        cannot be read now."""
        if delivery.body is not None:
            return delivery.body
        try:
            return self._bodies(delivery)
        except EventGone as exc:
            raise _Gone(str(exc)) from None
        except AgentMemoryError as exc:
            raise _AttemptFailed(f"the store's database could not be read ({exc.code})") from None

    def _post(self, delivery: Delivery, body: str) -> int:
        """Send ``body`` once for ``delivery``; its HTTP status, or ``_AttemptFailed`` saying
        why none."""
        host = urlsplit(delivery.url).hostname or "?"
        if delivery.secret is None:
            raise _AttemptFailed("the delivery lost its secret (nothing to sign with)")
        place = KeyPlace(
            delivery.org_id, delivery.instance_id, delivery.store, delivery.incarnation
        )
        try:
            secret = unseal(self._cipher, delivery.secret, place, "webhook_secret")
        except AgentMemoryError as exc:
            raise _AttemptFailed(f"the signing secret could not be read ({exc.code})") from None
        headers = signed_headers(secret, delivery.id, self._clock.now(), body)
        headers["user-agent"] = "KiviDB-Webhooks/1"
        call = CallDeadline(
            end=time.monotonic() + self._timeout,
            monotonic=time.monotonic,
            public_only=not self._allow_private,
        )
        token = current_call.set(call)
        try:
            with shared_http().stream(
                "POST",
                delivery.url,
                content=body.encode("utf-8"),
                headers=headers,
                timeout=httpx.Timeout(self._timeout, connect=min(CONNECT_TIMEOUT, self._timeout)),
            ) as response:
                return response.status_code  # the body is never read
        except EndpointRefused:
            raise _AttemptFailed(_NOT_PUBLIC.format(host=host)) from None
        except httpx.TimeoutException:
            raise _AttemptFailed(f"{host} did not answer within {self._timeout:g} s") from None
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ConnectError) and "did not resolve" in str(exc):
                # the same words as a private address: a store's owner learns nothing of which
                # names the service's own network resolves
                raise _AttemptFailed(_NOT_PUBLIC.format(host=host)) from None
            raise _AttemptFailed(f"could not reach {host} ({type(exc).__name__})") from None
        finally:
            current_call.reset(token)


_NOT_PUBLIC = "refused: {host} does not resolve to a public address"


class _AttemptFailed(Exception):
    """An attempt that got no HTTP status; the message is ours (a host name, never the URL)."""


class _Gone(Exception):
    """A delivery whose event's data is gone with its store: it fails at once, for good."""
