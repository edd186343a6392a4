"""Scheduling formats: schedule names, at() expressions, the background event, error mapping.

moto accepts any schedule name and expression, so the formats EventBridge Scheduler demands are
checked here against its documented constraints (CreateSchedule: ``Name`` 1-64 characters of
``[0-9a-zA-Z-_.]``; one-time schedules ``at(yyyy-mm-ddThh:mm:ss)``).
"""

import itertools
import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from botocore.stub import Stubber

from agent_memory.background.scheduler import (
    EventBridgeScheduler,
    ExtractionTarget,
    LocalScheduler,
    at_expression,
    make_scheduler,
    schedule_name,
)
from agent_memory.edge.http_errors import status_of
from agent_memory.edge.settings import FunctionSettings
from agent_memory.errors import SchedulerUnavailable

NAME = re.compile(r"[0-9A-Za-z._-]{1,64}")
AT = re.compile(r"at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)")

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:stack-background"
ROLE_ARN = "arn:aws:iam::123456789012:role/stack-ExtractionSchedulerRole-abc"


def test_schedule_name_is_within_eventbridge_limits_for_the_longest_ids():
    target = ExtractionTarget("i" * 64, "s" * 64, "x" * 256)
    name = schedule_name(target)
    assert NAME.fullmatch(name)
    assert len(name) <= 64
    assert name.startswith("kvm-")


def test_schedule_name_is_deterministic():
    a = schedule_name(ExtractionTarget("db1", "support", "chat:1@x"))
    b = schedule_name(ExtractionTarget("db1", "support", "chat:1@x"))
    assert a == b


def test_ids_that_would_concatenate_alike_get_different_names():
    # Each pair is equal as "instance store session" joined by any single separator-less
    # concatenation, or with "." / "-" / "_" / ":" as the separator.
    pieces = ["a", "b", "a.b", "a-b", "a_b", "ab", ".b", "b.", "a.", "-b", "b-", "a:b", "ab:"]
    seen: dict[str, tuple[str, str, str]] = {}
    for instance, store, session in itertools.product(pieces, repeat=3):
        try:
            target = ExtractionTarget(instance, store, session)
        except ValueError:
            continue  # not a valid id of that kind (e.g. ":" in a store name)
        name = schedule_name(target)
        assert name not in seen, f"{(instance, store, session)} and {seen[name]} share {name}"
        seen[name] = (instance, store, session)
    assert len(seen) > 500


def test_schedule_name_moves_when_any_one_id_changes():
    base = ExtractionTarget("db", "st", "se")
    names = {
        schedule_name(base),
        schedule_name(ExtractionTarget("db2", "st", "se")),
        schedule_name(ExtractionTarget("db", "st2", "se")),
        schedule_name(ExtractionTarget("db", "st", "se2")),
        schedule_name(ExtractionTarget("st", "db", "se")),
    }
    assert len(names) == 5


def test_at_expression_keeps_a_whole_second():
    moment = datetime(2026, 3, 11, 12, 0, 0, tzinfo=UTC)
    assert at_expression(moment) == "at(2026-03-11T12:00:00)"


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2026, 3, 11, 12, 0, 0, 1000, tzinfo=UTC), "at(2026-03-11T12:00:01)"),
        (datetime(2026, 3, 11, 12, 0, 0, 1, tzinfo=UTC), "at(2026-03-11T12:00:01)"),
        (datetime(2026, 3, 11, 12, 0, 0, 999999, tzinfo=UTC), "at(2026-03-11T12:00:01)"),
        (datetime(2026, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), "at(2027-01-01T00:00:00)"),
        (datetime(2028, 2, 28, 23, 59, 59, 1, tzinfo=UTC), "at(2028-02-29T00:00:00)"),
    ],
)
def test_at_expression_rounds_a_fraction_up(moment, expected):
    assert at_expression(moment) == expected


def test_at_expression_is_in_utc_whatever_the_zone():
    kolkata = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2026, 3, 11, 17, 30, 0, tzinfo=kolkata)
    assert at_expression(moment) == "at(2026-03-11T12:00:00)"


def test_at_expression_refuses_a_naive_datetime():
    with pytest.raises(ValueError, match="naive"):
        at_expression(datetime(2026, 3, 11, 12, 0, 0))


def test_at_expression_matches_the_documented_format_and_never_fires_early():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for step in range(0, 5000, 37):
        moment = start + timedelta(milliseconds=step * 7919)
        found = AT.fullmatch(at_expression(moment))
        assert found is not None
        fired = datetime(*map(int, found.groups()), tzinfo=UTC)
        assert moment <= fired < moment + timedelta(seconds=1)


def test_event_round_trips():
    target = ExtractionTarget("db1", "support.v2", "chat:1@x")
    event = target.event()
    assert event == {
        "kind": "extraction",
        "instance_id": "db1",
        "store": "support.v2",
        "session_id": "chat:1@x",
    }
    assert ExtractionTarget.from_event(event) == target
    assert ExtractionTarget.from_event(json.loads(target.input_json())) == target


def test_from_event_ignores_unknown_fields():
    event = {**ExtractionTarget("db", "st", "se").event(), "attempt": 2}
    assert ExtractionTarget.from_event(event) == ExtractionTarget("db", "st", "se")


@pytest.mark.parametrize(
    "event",
    [
        {"instance_id": "db", "store": "st", "session_id": "se"},
        {"kind": "summary", "instance_id": "db", "store": "st", "session_id": "se"},
        {"kind": "extraction", "store": "st", "session_id": "se"},
        {"kind": "extraction", "instance_id": "db", "store": "st", "session_id": 7},
        {"kind": "extraction", "instance_id": "db", "store": "a:b", "session_id": "se"},
        {"kind": "extraction", "instance_id": "db", "store": "st", "session_id": "x" * 257},
        {"kind": "extraction", "instance_id": "db", "store": "st", "session_id": ".."},
        {"kind": "extraction", "instance_id": "", "store": "st", "session_id": "se"},
        ["extraction", "db", "st", "se"],
    ],
)
def test_from_event_refuses_a_malformed_event(event):
    with pytest.raises(ValueError):
        ExtractionTarget.from_event(event)


def test_schedule_request_has_every_field_eventbridge_needs():
    scheduler = EventBridgeScheduler(group="g", function_arn=FUNCTION_ARN, role_arn=ROLE_ARN)
    target = ExtractionTarget("db", "st", "se")
    due = datetime(2026, 3, 11, 12, 0, 0, 250000, tzinfo=UTC)
    assert scheduler.schedule_request(target, due) == {
        "Name": schedule_name(target),
        "GroupName": "g",
        "ScheduleExpression": "at(2026-03-11T12:00:01)",
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "Target": {"Arn": FUNCTION_ARN, "RoleArn": ROLE_ARN, "Input": target.input_json()},
    }


def _scheduler_settings(environ):
    """The scheduler settings a function reads from ``environ`` (FunctionSettings)."""
    return FunctionSettings.from_environ(
        {"KIVIDB_CONTROL_URL": "redis://control:6379/0", **environ}
    ).scheduler_settings()


def test_the_settings_name_what_is_missing():
    settings = _scheduler_settings(
        {"KIVIDB_SCHEDULE_GROUP": "g", "KIVIDB_BACKGROUND_FUNCTION_ARN": FUNCTION_ARN}
    )
    with pytest.raises(ValueError, match="KIVIDB_SCHEDULER_ROLE_ARN"):
        make_scheduler(settings, lambda url: pytest.fail("no Redis client in AWS"))


def test_make_scheduler_picks_eventbridge_outside_the_local_stack():
    environ = {
        "KIVIDB_SCHEDULE_GROUP": "stack-extraction",
        "KIVIDB_BACKGROUND_FUNCTION_ARN": FUNCTION_ARN,
        "KIVIDB_SCHEDULER_ROLE_ARN": ROLE_ARN,
        "KIVIDB_CONTROL_URL": "redis://control:6379/0",
    }
    scheduler = make_scheduler(
        _scheduler_settings(environ), lambda url: pytest.fail("no Redis client in AWS")
    )
    assert isinstance(scheduler, EventBridgeScheduler)
    assert (scheduler.group, scheduler.function_arn, scheduler.role_arn) == (
        "stack-extraction",
        FUNCTION_ARN,
        ROLE_ARN,
    )


def test_make_scheduler_picks_the_local_scheduler_on_the_control_database():
    asked = []

    def client_for(url):
        asked.append(url)
        return object()

    environ = {"KIVIDB_SCHEDULER": "local", "KIVIDB_CONTROL_URL": "redis://127.0.0.1:1/0"}
    scheduler = make_scheduler(_scheduler_settings(environ), client_for)
    assert isinstance(scheduler, LocalScheduler)
    assert asked == ["redis://127.0.0.1:1/0"]


def _stubbed(monkeypatch):
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("scheduler", region_name="us-east-1")
    scheduler = EventBridgeScheduler(
        group="g", function_arn=FUNCTION_ARN, role_arn=ROLE_ARN, scheduler_client=client
    )
    return scheduler, Stubber(client)


def test_an_aws_error_answer_is_scheduler_unavailable_with_503(monkeypatch):
    scheduler, stub = _stubbed(monkeypatch)
    stub.add_client_error("create_schedule", "AccessDeniedException", http_status_code=403)
    with stub, pytest.raises(SchedulerUnavailable) as raised:
        scheduler.arm(ExtractionTarget("db", "st", "se"), datetime.now(UTC))
    assert "AccessDeniedException" in raised.value.message
    assert status_of(raised.value) == 503
    stub.assert_no_pending_responses()


def test_arming_gives_up_when_the_schedule_keeps_flickering(monkeypatch):
    scheduler, stub = _stubbed(monkeypatch)
    for _ in range(EventBridgeScheduler.MAX_ROUNDS):
        stub.add_client_error("create_schedule", "ConflictException", http_status_code=409)
        stub.add_client_error("update_schedule", "ResourceNotFoundException", http_status_code=404)
    with stub, pytest.raises(SchedulerUnavailable):
        scheduler.arm(ExtractionTarget("db", "st", "se"), datetime.now(UTC))
    stub.assert_no_pending_responses()


def test_a_conflict_on_update_is_not_taken_for_success(monkeypatch):
    scheduler, stub = _stubbed(monkeypatch)
    stub.add_client_error("create_schedule", "ConflictException", http_status_code=409)
    stub.add_client_error("update_schedule", "ConflictException", http_status_code=409)
    with stub, pytest.raises(SchedulerUnavailable, match="ConflictException"):
        scheduler.arm(ExtractionTarget("db", "st", "se"), datetime.now(UTC))


def test_scheduler_unavailable_answers_503_with_retry_after():
    from agent_memory.edge.resolver import Api

    answer = Api()._raw_error(SchedulerUnavailable("Background work could not be scheduled."))
    assert answer["statusCode"] == 503
    assert answer["headers"]["Retry-After"] == "1"
    assert json.loads(answer["body"])["error"] == "scheduler_unavailable"
