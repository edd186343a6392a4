"""Scheduling adapters against real services: EventBridge Scheduler on moto, Lambda through
botocore's Stubber, the local scheduler on the suite's Redis, and the local stack's loop."""

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
import redis
from botocore.stub import Stubber
from moto import mock_aws

from agent_memory.background.scheduler import (
    EventBridgeScheduler,
    ExtractionTarget,
    LocalScheduler,
    schedule_name,
)
from agent_memory.clock import SystemClock
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.errors import SchedulerUnavailable
from local.scheduler import SchedulerLoop, invoker, start_scheduler_loop
from local.template import Function
from tests.support.databases import database_client

REGION = "us-east-1"
GROUP = "kividb-test-extraction"
FUNCTION_ARN = f"arn:aws:lambda:{REGION}:123456789012:function:kividb-test-background"
ROLE_ARN = "arn:aws:iam::123456789012:role/kividb-test-ExtractionSchedulerRole"
TARGET = ExtractionTarget("db-1", "support", "chat:42@web")
DUE = datetime(2031, 5, 6, 7, 8, 9, 100000, tzinfo=UTC)


# --- EventBridge Scheduler (moto) -----------------------------------------------------------


class Spy:
    """A real (moto-backed) scheduler client that records each call and its outcome, and can
    run a hook before a call (to make a schedule vanish as if it had fired)."""

    def __init__(self, client):
        self.client = client
        self.calls: list[tuple[str, dict, str]] = []
        self.before: dict[str, object] = {}

    def _call(self, operation, kwargs):
        hook = self.before.pop(operation, None)
        if hook is not None:
            hook()
        try:
            result = getattr(self.client, operation)(**kwargs)
        except self.client.exceptions.ClientError as exc:
            self.calls.append((operation, kwargs, exc.response["Error"]["Code"]))
            raise
        self.calls.append((operation, kwargs, "ok"))
        return result

    def create_schedule(self, **kwargs):
        return self._call("create_schedule", kwargs)

    def update_schedule(self, **kwargs):
        return self._call("update_schedule", kwargs)


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        client = boto3.client("scheduler", region_name=REGION)
        client.create_schedule_group(Name=GROUP)
        yield client


@pytest.fixture
def spy(aws):
    return Spy(aws)


@pytest.fixture
def eventbridge(spy):
    return EventBridgeScheduler(
        group=GROUP, function_arn=FUNCTION_ARN, role_arn=ROLE_ARN, scheduler_client=spy
    )


def _schedule(aws, target=TARGET):
    return aws.get_schedule(Name=schedule_name(target), GroupName=GROUP)


def test_arm_creates_a_one_shot_schedule_with_exactly_the_expected_fields(aws, eventbridge):
    eventbridge.arm(TARGET, DUE)
    schedule = _schedule(aws)
    assert schedule["Name"] == schedule_name(TARGET)
    assert schedule["GroupName"] == GROUP
    assert schedule["ScheduleExpression"] == "at(2031-05-06T07:08:10)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == FUNCTION_ARN
    assert schedule["Target"]["RoleArn"] == ROLE_ARN
    assert json.loads(schedule["Target"]["Input"]) == TARGET.event()
    assert ExtractionTarget.from_event(json.loads(schedule["Target"]["Input"])) == TARGET


def test_arming_again_updates_the_one_schedule_with_the_full_request(aws, spy, eventbridge):
    eventbridge.arm(TARGET, DUE)
    later = DUE + timedelta(minutes=5)
    eventbridge.arm(TARGET, later)
    assert _schedule(aws)["ScheduleExpression"] == "at(2031-05-06T07:13:10)"
    names = [s["Name"] for s in aws.list_schedules(GroupName=GROUP)["Schedules"]]
    assert names == [schedule_name(TARGET)]
    assert [(op, outcome) for op, _, outcome in spy.calls] == [
        ("create_schedule", "ok"),
        ("create_schedule", "ConflictException"),
        ("update_schedule", "ok"),
    ]
    # UpdateSchedule resets what it is not sent: it must carry every field create had.
    assert spy.calls[2][1] == eventbridge.schedule_request(TARGET, later)
    assert spy.calls[2][1]["ActionAfterCompletion"] == "DELETE"


def test_another_session_gets_its_own_schedule(aws, eventbridge):
    other = ExtractionTarget("db-1", "support", "chat:43@web")
    eventbridge.arm(TARGET, DUE)
    eventbridge.arm(other, DUE)
    assert len(aws.list_schedules(GroupName=GROUP)["Schedules"]) == 2
    assert json.loads(_schedule(aws, other)["Target"]["Input"])["session_id"] == "chat:43@web"


def test_arming_after_the_schedule_fired_and_was_deleted_creates_it_again(aws, spy, eventbridge):
    eventbridge.arm(TARGET, DUE)
    aws.delete_schedule(Name=schedule_name(TARGET), GroupName=GROUP)  # ActionAfterCompletion
    eventbridge.arm(TARGET, DUE + timedelta(hours=1))
    assert _schedule(aws)["ScheduleExpression"] == "at(2031-05-06T08:08:10)"
    assert [outcome for _, _, outcome in spy.calls] == ["ok", "ok"]


def test_a_schedule_that_fires_between_conflict_and_update_is_created_again(aws, spy, eventbridge):
    eventbridge.arm(TARGET, DUE)
    spy.before["update_schedule"] = lambda: aws.delete_schedule(
        Name=schedule_name(TARGET), GroupName=GROUP
    )
    eventbridge.arm(TARGET, DUE + timedelta(days=1))
    assert _schedule(aws)["ScheduleExpression"] == "at(2031-05-07T07:08:10)"
    assert [(op, outcome) for op, _, outcome in spy.calls] == [
        ("create_schedule", "ok"),
        ("create_schedule", "ConflictException"),
        ("update_schedule", "ResourceNotFoundException"),
        ("create_schedule", "ok"),
    ]


@pytest.fixture
def lambda_stub(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("lambda", region_name=REGION)
    scheduler = EventBridgeScheduler(
        group=GROUP, function_arn=FUNCTION_ARN, role_arn=ROLE_ARN, lambda_client=client
    )
    with Stubber(client) as stub:
        yield scheduler, stub
        stub.assert_no_pending_responses()


def test_run_now_invokes_the_background_function_asynchronously(lambda_stub):
    scheduler, stub = lambda_stub
    stub.add_response(
        "invoke",
        {"StatusCode": 202},
        {
            "FunctionName": FUNCTION_ARN,
            "InvocationType": "Event",
            "Payload": TARGET.input_json().encode("utf-8"),
        },
    )
    scheduler.run_now(TARGET)


def test_run_now_failing_is_scheduler_unavailable(lambda_stub):
    scheduler, stub = lambda_stub
    stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
    with pytest.raises(SchedulerUnavailable, match="TooManyRequestsException"):
        scheduler.run_now(TARGET)


# --- the local scheduler (Redis) ------------------------------------------------------------


class FakeClock:
    def __init__(self, now):
        self._now = now

    def now(self):
        return self._now

    def advance(self, **delta):
        self._now += timedelta(**delta)


@pytest.fixture
def keys(client: redis.Redis):
    keys = LocalScheduleKeys(f"test-{uuid.uuid4().hex[:12]}")
    yield keys
    client.delete(keys.due, keys.events)  # only this test's own keys


@pytest.fixture
def clock():
    return FakeClock(datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def local(client, clock, keys):
    return LocalScheduler(client, clock, keys=keys)


def test_an_armed_entry_is_taken_at_its_due_time_and_only_once(local, clock):
    due = clock.now() + timedelta(seconds=30)
    local.arm(TARGET, due)
    assert local.take_due(due - timedelta(milliseconds=1)) == []
    assert local.take_due(due) == [TARGET.event()]
    assert local.take_due(due + timedelta(hours=1)) == []
    assert local.pending() == {}


def test_arming_again_replaces_the_due_time(local, clock):
    first = clock.now() + timedelta(seconds=10)
    later = clock.now() + timedelta(seconds=60)
    local.arm(TARGET, first)
    local.arm(TARGET, later)
    assert local.pending() == {schedule_name(TARGET): later}
    assert local.take_due(first) == []
    assert local.take_due(later) == [TARGET.event()]


def test_run_now_is_due_immediately(local, clock):
    local.run_now(TARGET)
    assert local.take_due(clock.now()) == [TARGET.event()]


def test_run_now_leaves_the_sessions_armed_schedule_armed(local, clock):
    later = clock.now() + timedelta(seconds=30)
    local.arm(TARGET, later)
    local.run_now(TARGET)  # like Lambda's asynchronous invoke: apart from the schedule
    assert local.take_due(clock.now()) == [TARGET.event()]
    assert local.pending() == {schedule_name(TARGET): later}
    assert local.take_due(later) == [TARGET.event()]


def test_a_malformed_entry_does_not_take_the_batch_down(local, clock, redis_url, keys):
    targets = [ExtractionTarget("db", "st", f"ok{i}") for i in range(3)]
    for target in targets:
        local.arm(target, clock.now())
    raw = database_client(redis_url, binary=True)
    raw.zadd(keys.due, {"zz-bad": 0})
    raw.hset(keys.events, "zz-bad", "{not json")
    taken = local.take_due(clock.now())
    assert sorted(e["session_id"] for e in taken) == ["ok0", "ok1", "ok2"]
    assert local.pending() == {}


def test_take_due_returns_the_earliest_first_and_at_most_limit(local, clock):
    targets = [ExtractionTarget("db", "st", f"s{i}") for i in range(5)]
    for i, target in enumerate(reversed(targets)):
        local.arm(target, clock.now() + timedelta(seconds=i))
    taken = local.take_due(clock.now() + timedelta(minutes=1), limit=3)
    assert [e["session_id"] for e in taken] == ["s4", "s3", "s2"]
    assert len(local.pending()) == 2


def test_a_naive_due_time_is_refused(local):
    with pytest.raises(ValueError, match="naive"):
        local.arm(TARGET, datetime(2030, 1, 1, 12, 0, 0))


def test_two_takers_never_take_the_same_entry(redis_url, keys, clock):
    targets = [ExtractionTarget("db", "st", f"session-{i}") for i in range(300)]
    armer = LocalScheduler(database_client(redis_url), clock, keys=keys)
    for target in targets:
        armer.run_now(target)
    taken: list[list[dict[str, str]]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def take(slot: int) -> None:
        # Each thread its own connection, bytes replies on two of them.
        client = database_client(redis_url, binary=slot % 2 == 1)
        scheduler = LocalScheduler(client, clock, keys=keys)
        start.wait()
        while batch := scheduler.take_due(clock.now(), limit=7):
            taken[slot].extend(batch)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    sessions = [event["session_id"] for batch in taken for event in batch]
    assert len(sessions) == len(set(sessions)) == 300
    assert sum(1 for batch in taken if batch) >= 2, "the takers did not actually compete"


# --- the local stack's loop -----------------------------------------------------------------

TINY_HANDLER = """
import time

calls = []


def lambda_handler(event, context):
    if event.get("session_id") == "boom":
        raise RuntimeError("a failing run")
    calls.append(
        {
            "event": event,
            "function_name": context.function_name,
            "remaining_ms": context.get_remaining_time_in_millis(),
            "memory": context.memory_limit_in_mb,
            "at": time.time(),
        }
    )
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Function:
    (tmp_path / "tiny.py").write_text(TINY_HANDLER)
    return Function(
        f"Tiny{uuid.uuid4().hex[:8]}",
        tmp_path,
        "tiny.lambda_handler",
        timeout_seconds=300,
        memory_mb=1024,
    )


def test_the_loop_invokes_the_handler_with_the_schedule_event_at_the_due_time(local, clock, tiny):
    loop = SchedulerLoop(local, invoker(tiny), clock=clock)
    local.arm(TARGET, clock.now() + timedelta(seconds=5))
    assert loop.run_once() == 0
    clock.advance(seconds=4, milliseconds=999)
    assert loop.run_once() == 0
    assert tiny.module().calls == []
    clock.advance(milliseconds=1)
    assert loop.run_once() == 1
    (call,) = tiny.module().calls
    assert call["event"] == TARGET.event()
    assert call["function_name"] == tiny.logical_id
    assert call["memory"] == 1024
    assert 290_000 < call["remaining_ms"] <= 300_000
    assert loop.run_once() == 0


def test_a_failing_run_is_printed_and_the_loop_goes_on(local, clock, tiny, capsys):
    loop = SchedulerLoop(local, invoker(tiny), clock=clock)
    local.run_now(ExtractionTarget("db", "st", "boom"))
    clock.advance(milliseconds=1)
    local.run_now(TARGET)
    assert loop.run_once() == 2
    assert [c["event"] for c in tiny.module().calls] == [TARGET.event()]
    assert "a failing run" in capsys.readouterr().err


def test_the_launcher_loop_fires_on_its_own_thread(redis_url, keys, tiny):
    client = database_client(redis_url)
    arming = LocalScheduler(client, SystemClock(), keys=keys)
    loop = start_scheduler_loop(redis_url, tiny, keys=keys, interval=0.02)
    try:
        due = datetime.now(UTC) + timedelta(milliseconds=300)
        arming.arm(TARGET, due)
        deadline = time.monotonic() + 10
        while not tiny.module().calls and time.monotonic() < deadline:
            time.sleep(0.01)
        (call,) = tiny.module().calls
        assert call["event"] == TARGET.event()
        assert call["at"] >= due.timestamp()
    finally:
        loop.stop()
    assert loop._thread is not None and not loop._thread.is_alive()
