"""Webhook deliveries (``agent_memory.webhooks``) on a real server and real loopback receivers:
signed as Standard Webhooks has it (checked with the ``standardwebhooks`` package), at least
once with the same id on every attempt, retried on the schedule for 24 hours whatever the
receiver does (fails, hangs, answers slowly), a store's log of its last 100, and the public
address rule at the moment of sending.

The outbox is one set of queues for the whole control database, so these tests have a server of
their own: the local stack of the HTTP tests (same pytest session) sends from its own."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from cryptography.fernet import Fernet
from hypothesis import given, settings, strategies as st
from standardwebhooks import Webhook

from agent_memory.clock import to_ms
from agent_memory.database.keys import ControlKeys
from agent_memory.providers.secrets import FernetCipher, KeyPlace, seal
from agent_memory.stores.models import StoreConfig
from agent_memory.webhooks.bodies import EventGone, keep_bodies, read_body
from agent_memory.webhooks.delivery import PER_ORG, Sender
from agent_memory.webhooks.events import event_for
from agent_memory.webhooks.models import WebhookEndpoint
from agent_memory.webhooks.outbox import LEASE_MS, LOG_SIZE, RETRY_WINDOW_MS, Outbox
from agent_memory.webhooks.signing import new_secret, signed_headers
from local.bootstrap import start_redis_server
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tools.webhook_receiver import WebhookReceiver

ORG, INSTANCE = "org_hooks", "inst_hooks"
PRIVATE = {"allow_private_endpoints": True}
PUBLIC = {"allow_private_endpoints": False}


@pytest.fixture(scope="module")
def control(tmp_path_factory) -> Iterator[redis.Redis]:
    database = start_redis_server(tmp_path_factory.mktemp("webhooks-redis"), persist=False)
    try:
        yield redis.Redis.from_url(database.url, decode_responses=True)
    finally:
        database.stop()


@pytest.fixture
def parts(control) -> Iterator[tuple[Outbox, Sender, MovableClock, FernetCipher]]:
    control.flushdb()  # the module's own server
    clock = MovableClock()
    clock.moment = clock.moment.replace(microsecond=0)  # whole milliseconds, as stored
    cipher = FernetCipher(Fernet.generate_key())
    outbox = Outbox(control, clock)
    sender = Sender(outbox, cipher, clock, _reader(control), allow_private=True, timeout=1.0)
    yield outbox, sender, clock, cipher


def _reader(control):
    """The bodies port as the runtime's, on this module's server (the store's checks are the
    runtime's: tests/e2e/test_webhooks_http.py)."""

    def read(delivery):
        body = read_body(control, delivery)
        if body is None:
            raise EventGone("not sent: the store (and the event's data) was deleted")
        return body

    return read


def _store(cipher, url: str, events: list[str], secret: str, name: str | None = None, org=ORG):
    name = name or unique("hooked")
    place = KeyPlace(org, INSTANCE, name, "0a0b0c0d0e0f")
    now = datetime.now(UTC)
    return StoreConfig.model_validate(
        {
            "name": name,
            "incarnation": "0a0b0c0d0e0f",
            "created_at": now,
            "updated_at": now,
            "webhooks": [{"url": url, "events": events}],
            "webhook_secret_ciphertext": seal(cipher, secret, place, "webhook_secret"),
        },
        context={"stored": True},
    )


def _queue(outbox, clock, config, event="memory.created", data=None, org=ORG):
    """Queue ``event`` as a route does (``StoreHandle.flush``): its body in the store's
    keyspace (this module's server stands for the instance too), its deliveries in the outbox."""
    made = event_for(config, org, INSTANCE, event, data or {"memory_id": "m1"}, clock.now())
    if made is None:
        return []
    if made.in_store:
        keep_bodies(outbox._redis, config.keys(), [(made.id, made.body)])
    outbox.enqueue(made.deliveries)
    return made.deliveries


def test_a_delivery_is_signed_and_verifies_with_the_standard_webhooks_package(parts):
    outbox, sender, clock, cipher = parts
    secret = new_secret()
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created"], secret)
        (made,) = _queue(outbox, clock, config, data={"memory": {"text": "likes tea ☕"}})
        report = sender.deliver_due(5)
        assert (report.attempts, report.delivered) == (1, 1)
        (got,) = receiver.delivered()
    payload = Webhook(secret).verify(got.body, got.headers)
    assert got.headers["webhook-id"] == made.id
    assert payload["type"] == "memory.created"
    assert payload["data"] == {
        "instance_id": INSTANCE,
        "store": config.name,
        "memory": {"text": "likes tea ☕"},
    }
    with pytest.raises(Exception, match="signature"):
        Webhook(new_secret()).verify(got.body, got.headers)  # another store's secret
    (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
    assert (view.status, view.attempts, view.last_status_code, view.last_error) == (
        "delivered",
        1,
        204,
        None,
    )


def test_only_the_endpoints_that_asked_for_an_event_get_it_and_none_without_a_secret(parts):
    outbox, _, clock, cipher = parts
    config = _store(cipher, "https://hooks.example.com/a", ["session.deleted"], new_secret())
    assert _queue(outbox, clock, config, "memory.created") == []
    assert len(_queue(outbox, clock, config, "session.deleted")) == 1
    unsigned = config.model_copy(update={"webhook_secret_ciphertext": None})
    assert event_for(unsigned, ORG, INSTANCE, "session.deleted", {}, clock.now()) is None


def test_a_failing_receiver_is_tried_on_the_schedule_with_the_same_id_until_it_answers(parts):
    outbox, sender, clock, cipher = parts
    secret = new_secret()
    with WebhookReceiver(["fail", "fail", "fail"]) as receiver:
        config = _store(cipher, receiver.url, ["memory.deleted"], secret)
        (made,) = _queue(outbox, clock, config, "memory.deleted")
        waits = []
        while not receiver.delivered():
            assert sender.deliver_due(5).attempts == 1
            (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
            if view.status == "pending":
                waits.append((view.next_attempt_at - clock.now()).total_seconds())
                assert sender.deliver_due(5).attempts == 0  # not due before its time
                clock.moment = view.next_attempt_at
        assert waits == [5, 300, 1800]  # the Standard Webhooks reference schedule
        ids = {r.headers["webhook-id"] for r in receiver.received}
        assert ids == {made.id} and len(receiver.received) == 4
        for attempt in receiver.received:  # each signed anew for its own timestamp
            moment = datetime.fromtimestamp(int(attempt.headers["webhook-timestamp"]), UTC)
            expected = Webhook(secret).sign(made.id, moment, attempt.body.decode())
            assert attempt.headers["webhook-signature"] == expected
    (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
    assert (view.status, view.attempts, view.last_status_code) == ("delivered", 4, 204)
    assert outbox.due_count() == 0


def test_a_receiver_that_never_answers_2xx_is_given_up_24_hours_after_the_event(parts):
    outbox, sender, clock, cipher = parts
    with WebhookReceiver(["fail"] * 100) as receiver:
        config = _store(cipher, receiver.url, ["store.deleted"], new_secret())
        _queue(outbox, clock, config, "store.deleted")
        end = clock.now() + timedelta(milliseconds=RETRY_WINDOW_MS)
        attempts = []
        for _ in range(20):
            if not sender.deliver_due(5).attempts:
                break
            attempts.append(clock.now())
            (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
            if view.status != "pending":
                break
            clock.moment = view.next_attempt_at
    assert view.status == "failed" and view.next_attempt_at is None
    assert view.last_error == "the endpoint answered HTTP 500"
    assert attempts[-1] == end  # the last attempt at the end of the window, none after
    assert len(attempts) == 8 and outbox.due_count() == 0
    assert len(receiver.received) == 8


def test_a_receiver_that_hangs_or_refuses_fails_the_attempt_and_others_are_not_held_up(
    parts, control
):
    outbox, _, clock, cipher = parts
    # two seconds an attempt: the slow receiver's half second is in time on a loaded machine
    sender = Sender(outbox, cipher, clock, _reader(control), allow_private=True, timeout=2.0)
    with WebhookReceiver(["hang:4"]) as hanging, WebhookReceiver(["slow:0.5"]) as slow:
        hung = _store(cipher, hanging.url, ["memory.created"], new_secret())
        slowed = _store(cipher, slow.url, ["memory.created"], new_secret())
        closed = _store(cipher, "http://127.0.0.1:1/hooks", ["memory.created"], new_secret())
        for config in (hung, slowed, closed):
            _queue(outbox, clock, config)
        report = sender.deliver_due(10)
        assert (report.attempts, report.delivered) == (3, 1)
        assert len(slow.delivered()) == 1
    (view,) = outbox.log(ORG, INSTANCE, hung.name).deliveries
    assert view.status == "pending" and view.last_error == "127.0.0.1 did not answer within 2 s"
    (view,) = outbox.log(ORG, INSTANCE, closed.name).deliveries
    assert view.last_status_code is None and view.last_error.startswith("could not reach")


def test_a_receiver_that_hangs_holds_up_no_other_stores_deliveries(parts, control):
    outbox, _, clock, cipher = parts
    # attempts of 3 s: the other store's delivery must come well before any of them ends
    sender = Sender(outbox, cipher, clock, _reader(control), allow_private=True, timeout=3.0)
    with WebhookReceiver(["hang:5"] * 20) as hanging, WebhookReceiver() as other:
        hung = _store(cipher, hanging.url, ["memory.created"], new_secret())
        for _ in range(20):
            _queue(outbox, clock, hung)
        waiting = _store(cipher, other.url, ["memory.created"], new_secret())
        _queue(outbox, clock, waiting)
        started = time.monotonic()
        worker = threading.Thread(target=sender.deliver_due, args=(1,))
        worker.start()
        other.wait_for(1, seconds=5)
        assert time.monotonic() - started < 2.5  # not behind the hanging ones (3 s each)
        worker.join()
        assert len(hanging.received) <= 4  # four at a time; the rest given back for later
    views = outbox.log(ORG, INSTANCE, hung.name).deliveries
    assert {v.status for v in views} == {"pending"} and len(views) == 20


def test_hanging_receivers_of_one_organization_hold_up_no_other_organizations_deliveries(
    parts, control
):
    """Issue 32: five endpoints of one organization that never answer, and 20 events for them
    queued first, once held every thread of the sender (16 threads, 4 per endpoint), so another
    organization's deliveries waited for the attempts to time out. Now an organization runs at
    most ``PER_ORG`` attempts at once and the organizations are claimed in turn."""
    outbox, _, clock, cipher = parts
    # attempts of 4 s: the healthy organization's deliveries must all come well before any ends
    sender = Sender(outbox, cipher, clock, _reader(control), allow_private=True, timeout=4.0)
    hanging = [WebhookReceiver(["hang:6"] * 4) for _ in range(5)]
    with contextlib.ExitStack() as receivers:
        for receiver in hanging:
            receivers.enter_context(receiver)
        healthy = receivers.enter_context(WebhookReceiver())
        for receiver in hanging:
            hung = _store(cipher, receiver.url, ["memory.created"], new_secret(), org="org_hangs")
            for _ in range(4):
                _queue(outbox, clock, hung, org="org_hangs")
        fine = _store(cipher, healthy.url, ["memory.created"], new_secret(), org="org_fine")
        for _ in range(3):
            _queue(outbox, clock, fine, org="org_fine")
        started = time.monotonic()
        worker = threading.Thread(target=sender.deliver_due, args=(1,))
        worker.start()
        try:
            healthy.wait_for(3, seconds=8)
            took = time.monotonic() - started
        finally:
            worker.join()
        assert took < 2.5, f"the healthy organization waited {took:.1f} s"
        attempted = sum(len(r.received) for r in hanging)
        assert attempted <= PER_ORG  # its cap; the rest of its deliveries wait their turn
    assert outbox.due_count() == 20  # the hanging organization's, all still to be tried


def test_a_claim_takes_the_organizations_in_turn_and_none_past_its_room(parts):
    outbox, _, clock, cipher = parts
    with WebhookReceiver() as receiver:
        busy = _store(cipher, receiver.url, ["memory.created"], new_secret(), org="org_busy")
        for _ in range(30):
            _queue(outbox, clock, busy, org="org_busy")
        clock.moment += timedelta(seconds=1)  # the other organization's event comes later
        quiet = _store(cipher, receiver.url, ["memory.created"], new_secret(), org="org_quiet")
        (late,) = _queue(outbox, clock, quiet, org="org_quiet")
        first = outbox.claim(2)
        assert sorted(d.org_id for d in first) == ["org_busy", "org_quiet"]
        assert late.id in {d.id for d in first}
        more = outbox.claim(10, busy={"org_busy": 3})
        assert [d.org_id for d in more] == ["org_busy"] * 3  # its room, though 28 are due
        assert outbox.claim(10, busy={"org_busy": 0}) == []
        assert len(outbox.claim(100, room=100)) == 26
    assert outbox.due_count() == 31  # leased, not removed


def test_deliveries_queued_in_the_one_due_set_of_before_are_still_sent(parts, control):
    outbox, sender, clock, cipher = parts
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created"], new_secret())
        (made,) = _queue(outbox, clock, config)
        # as the previous version queued it: in the one due set, not its organization's queue
        control.delete(ControlKeys.webhooks_due_of(ORG), ControlKeys.webhooks_due_orgs)
        control.zadd(ControlKeys.webhooks_due, {made.id: to_ms(clock.now())})
        control.zadd(ControlKeys.webhooks_due, {"msg_gone": to_ms(clock.now())})
        assert outbox.due_count() == 2
        assert sender.deliver_due(5).delivered == 1
        assert [r.headers["webhook-id"] for r in receiver.delivered()] == [made.id]
    assert outbox.due_count() == 0 and not control.exists(ControlKeys.webhooks_due)


def test_a_delivery_whose_sender_died_is_sent_again_with_the_same_id(parts):
    outbox, sender, clock, cipher = parts
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created"], new_secret())
        (made,) = _queue(outbox, clock, config)
        (claimed,) = outbox.claim(10)  # a sender that dies before it settles
        assert claimed.id == made.id and outbox.claim(10) == []  # leased
        clock.moment += timedelta(milliseconds=LEASE_MS)
        assert sender.deliver_due(5).delivered == 1
        assert [r.headers["webhook-id"] for r in receiver.delivered()] == [made.id]


def test_a_private_address_is_refused_when_sent_unless_the_stack_allows_it(parts, control):
    outbox, _, clock, cipher = parts
    public_only = Sender(outbox, cipher, clock, _reader(control), allow_private=False, timeout=1.0)
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created"], new_secret())
        _queue(outbox, clock, config)
        assert public_only.deliver_due(5).delivered == 0
        assert receiver.received == []
    (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
    assert view.last_error == "refused: 127.0.0.1 does not resolve to a public address"
    unknown = _store(cipher, "https://no-such-name.invalid/in", ["memory.created"], new_secret())
    _queue(outbox, clock, unknown)
    public_only.deliver_due(5)
    (view,) = outbox.log(ORG, INSTANCE, unknown.name).deliveries
    # the same words whether a name is private or does not resolve at all
    assert view.last_error == "refused: no-such-name.invalid does not resolve to a public address"


def test_a_stores_log_keeps_its_last_100_and_drops_the_records_of_settled_older_ones(
    parts, control
):
    outbox, sender, clock, cipher = parts
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created"], new_secret())
        first = _queue(outbox, clock, config)[0]
        sender.deliver_due(5)
        for n in range(LOG_SIZE):
            _queue(outbox, clock, config, data={"n": n})
        log = outbox.log(ORG, INSTANCE, config.name).deliveries
        assert len(log) == LOG_SIZE and first.id not in {d.webhook_id for d in log}
        assert control.exists(f"kividb:control:{{control}}:webhook:{first.id}") == 0
        assert json.loads(receiver.delivered()[0].body)["data"]["memory_id"] == "m1"


def test_the_body_never_carries_the_secret_or_a_provider_key(parts):
    outbox, _, clock, cipher = parts
    secret = new_secret()
    config = _store(cipher, "https://hooks.example.com/", ["memory.created"], secret)
    config = config.model_copy(update={"llm_api_key_ciphertext": "ciphertext-of-a-key"})
    made = event_for(config, ORG, INSTANCE, "memory.created", {"memory_id": "m1"}, clock.now())
    assert made is not None
    for hidden in (
        secret,
        secret.removeprefix("whsec_"),
        "ciphertext-of-a-key",
        config.webhook_secret_ciphertext,
    ):
        assert hidden not in made.body
    outbox.enqueue(made.deliveries)
    (view,) = outbox.log(ORG, INSTANCE, config.name).deliveries
    assert "secret" not in view.model_dump_json()


def test_what_an_event_says_of_the_stores_data_is_kept_in_the_store_and_goes_with_it(
    parts, control
):
    outbox, sender, clock, cipher = parts
    with WebhookReceiver() as receiver:
        config = _store(cipher, receiver.url, ["memory.created", "store.deleted"], new_secret())
        data = {"memory": {"text": "Hal's passport is in the drawer"}}
        (queued,) = _queue(outbox, clock, config, data=data)
        control_keys = list(control.scan_iter("kividb:control:*"))
        kept = [control.dump(k) or b"" for k in control_keys]
        assert control_keys and not any(b"passport" in k for k in kept)
        for key in control.scan_iter(config.keys().all_pattern):  # the store is deleted
            control.delete(key)
        (gone,) = _queue(outbox, clock, config, "store.deleted", {"deleted_at": "now"})
        report = sender.deliver_due(5)
        assert (report.delivered, report.given_up) == (1, 1)  # one sent, one with nothing left
        (got,) = receiver.delivered()
        assert got.headers["webhook-id"] == gone.id  # the store's last word is still sent
    views = {d.webhook_id: d for d in outbox.log(ORG, INSTANCE, config.name).deliveries}
    lost = views[queued.id]
    assert (lost.status, lost.attempts, lost.next_attempt_at) == ("failed", 0, None)
    assert lost.last_error.startswith("not sent: the store")


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(),
    webhook_id=st.from_regex(r"msg_[0-9a-z]{24}", fullmatch=True),
    seconds=st.integers(0, 4_000_000_000),
)
def test_any_body_signed_here_verifies_with_the_package_and_no_other_body_does(
    body, webhook_id, seconds
):
    secret = new_secret()
    moment = datetime.fromtimestamp(seconds, UTC)
    headers = signed_headers(secret, webhook_id, moment, body)
    assert headers["webhook-timestamp"] == str(seconds)
    expected = Webhook(secret).sign(webhook_id, moment, body)
    assert headers["webhook-signature"] == expected
    assert Webhook(secret).sign(webhook_id, moment, body + "x") != expected


def test_webhook_urls_are_checked_when_saved():
    ok = WebhookEndpoint.model_validate(
        {"url": "https://hooks.example.com/in?token=a", "events": ["memory.created"]},
        context=PUBLIC,
    )
    assert ok.host() == "hooks.example.com"
    for url, problem in [
        ("http://hooks.example.com/in", "https://"),
        ("https://user:pw@hooks.example.com/", "credentials"),
        ("https://hooks.example.com/#x", "fragment"),
        ("https://127.0.0.1/in", "public address"),
        ("https://10.0.0.8/in", "public address"),
        ("https://169.254.169.254/latest", "public address"),
        ("https://localhost/in", "localhost"),
        ("https://hooks.example.com/ in", "spaces"),
    ]:
        with pytest.raises(ValueError, match=problem):
            WebhookEndpoint.model_validate(
                {"url": url, "events": ["memory.created"]}, context=PUBLIC
            )
    loopback = WebhookEndpoint.model_validate(
        {"url": "http://127.0.0.1:9/in", "events": ["memory.created"]}, context=PRIVATE
    )
    assert loopback.url.startswith("http://")
    for events in ([], ["memory.created", "memory.created"], ["memory.renamed"]):
        with pytest.raises(ValueError):
            WebhookEndpoint.model_validate({"url": "https://h.example.com/", "events": events})


def test_created_ms_is_the_event_time(parts):
    outbox, _, clock, cipher = parts
    config = _store(cipher, "https://hooks.example.com/", ["memory.created"], new_secret())
    (made,) = _queue(outbox, clock, config)
    assert made.created_ms == to_ms(clock.now())
