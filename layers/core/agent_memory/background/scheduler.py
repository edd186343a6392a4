"""Scheduling port: run a session's extraction later (one-shot, per session) or now.

The core asks a :class:`Scheduler` to ``arm`` a session's extraction at a due time, or to
``run_now``; it never knows which service does it. Two adapters serve the port:

- :class:`EventBridgeScheduler` (AWS): one EventBridge Scheduler one-shot schedule per session,
  in the stack's schedule group, whose target is the background function with
  :meth:`ExtractionTarget.event` as its input; ``run_now`` is an asynchronous Lambda invoke.
- :class:`LocalScheduler` (the local stack): the same contract kept in Redis; the local stack's
  scheduler loop (``local/scheduler.py``) takes due entries with :meth:`LocalScheduler.take_due`
  and invokes the background function's handler with the same event.

Both deliver exactly the JSON object of :meth:`ExtractionTarget.event` to the background
function, which parses it back with :meth:`ExtractionTarget.from_event`.

EventBridge Scheduler API facts relied on here (API reference, scheduler 2021-06-30):

- ``CreateSchedule`` / ``UpdateSchedule`` take ``Name`` and ``GroupName`` (1-64 characters of
  ``[0-9a-zA-Z-_.]``), ``ScheduleExpression`` (a one-time schedule is
  ``at(yyyy-mm-ddThh:mm:ss)``, evaluated in ``ScheduleExpressionTimezone``),
  ``FlexibleTimeWindow`` (``{"Mode": "OFF"}``), ``ActionAfterCompletion`` (``NONE`` or
  ``DELETE``: delete the schedule once it has invoked its target) and ``Target``
  (``Arn``, ``RoleArn``, ``Input``).
  https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html
- ``CreateSchedule`` on an existing name fails with ``ConflictException``; ``UpdateSchedule``
  on a missing one with ``ResourceNotFoundException``. ``UpdateSchedule`` replaces every field,
  unset optional fields included, so it is always sent the full request.
  https://docs.aws.amazon.com/scheduler/latest/APIReference/API_UpdateSchedule.html
- Every schedule invokes its target with 60-second precision: an ``at()`` schedule fires within
  the minute after its time (flexible window off).
  https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, Protocol

import redis
from pydantic import BaseModel, ConfigDict

from agent_memory.clock import Clock, SystemClock, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import SchedulerUnavailable
from agent_memory.models import (
    INSTANCE_ID_PATTERN,
    SESSION_ID_PATTERN,
    STORE_NAME_PATTERN,
)
from agent_memory.observability import logger

EVENT_KIND = "extraction"
CONSOLIDATION_KIND = "consolidation"

SCHEDULER_ENV = "KIVIDB_SCHEDULER"
SCHEDULE_GROUP_ENV = "KIVIDB_SCHEDULE_GROUP"
BACKGROUND_FUNCTION_ARN_ENV = "KIVIDB_BACKGROUND_FUNCTION_ARN"
SCHEDULER_ROLE_ARN_ENV = "KIVIDB_SCHEDULER_ROLE_ARN"
CONTROL_URL_ENV = "KIVIDB_CONTROL_URL"

SCHEDULE_NAME_PREFIX = "kvm-"
SCHEDULE_NAME_PATTERN = r"^[0-9A-Za-z._-]{1,64}$"
AT_EXPRESSION_PATTERN = r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)$"

_ID_PATTERNS = {
    "instance_id": re.compile(INSTANCE_ID_PATTERN),
    "store": re.compile(STORE_NAME_PATTERN),
    "session_id": re.compile(SESSION_ID_PATTERN),
}


@dataclass(frozen=True)
class ExtractionTarget:
    """The session whose extraction is scheduled: ids as the API validates them (DESIGN 2).

    Raises ``ValueError`` when an id is not a valid instance id, store name or session id, so a
    target that exists can always be named and serialized.
    """

    instance_id: str
    store: str
    session_id: str

    def __post_init__(self) -> None:
        for field, pattern in _ID_PATTERNS.items():
            value = getattr(self, field)
            if not isinstance(value, str) or pattern.fullmatch(value) is None:
                raise ValueError(f"{field} {value!r} is not a valid {field.replace('_', ' ')}")

    def event(self) -> dict[str, str]:
        """The JSON input the background function receives, from EventBridge Scheduler (the
        schedule target's ``Input``), from ``run_now``'s Lambda invoke, and locally:
        ``{"kind": "extraction", "instance_id", "store", "session_id"}``."""
        return {
            "kind": EVENT_KIND,
            "instance_id": self.instance_id,
            "store": self.store,
            "session_id": self.session_id,
        }

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> ExtractionTarget:
        """Parse :meth:`event` back. ``ValueError`` when ``event`` is not a mapping, its
        ``kind`` is not ``extraction``, or an id is missing, not a string or not valid.
        Unknown extra fields are ignored (room for later versions of the event)."""
        if not isinstance(event, Mapping):
            raise ValueError("an extraction event is a JSON object")
        if event.get("kind") != EVENT_KIND:
            raise ValueError(f"not an extraction event (kind {event.get('kind')!r})")
        values = {}
        for field in ("instance_id", "store", "session_id"):
            value = event.get(field)
            if not isinstance(value, str):
                raise ValueError(f"an extraction event needs a string {field!r}")
            values[field] = value
        return cls(**values)

    def input_json(self) -> str:
        """:meth:`event` as compact JSON, keys sorted (the schedule's ``Target.Input``)."""
        return json.dumps(self.event(), separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class ConsolidationTarget:
    """The actor whose consolidation is scheduled (``agent_memory.consolidation``): one
    one-shot schedule per actor, as extraction has one per session. ``ValueError`` for an id
    the API would refuse."""

    instance_id: str
    store: str
    actor_id: str

    def __post_init__(self) -> None:
        checks = (
            ("instance_id", INSTANCE_ID_PATTERN),
            ("store", STORE_NAME_PATTERN),
            ("actor_id", SESSION_ID_PATTERN),
        )
        for field, pattern in checks:
            value = getattr(self, field)
            if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
                raise ValueError(f"{field} {value!r} is not a valid {field.replace('_', ' ')}")

    def event(self) -> dict[str, str]:
        """``{"kind": "consolidation", "instance_id", "store", "actor_id"}``: what the
        background function receives for the actor's run."""
        return {
            "kind": CONSOLIDATION_KIND,
            "instance_id": self.instance_id,
            "store": self.store,
            "actor_id": self.actor_id,
        }

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> ConsolidationTarget:
        """Parse :meth:`event` back; ``ValueError`` as ``ExtractionTarget.from_event``."""
        if not isinstance(event, Mapping) or event.get("kind") != CONSOLIDATION_KIND:
            raise ValueError("not a consolidation event")
        values = {f: event.get(f) for f in ("instance_id", "store", "actor_id")}
        if not all(isinstance(v, str) for v in values.values()):
            raise ValueError("a consolidation event needs string ids")
        return cls(**{k: str(v) for k, v in values.items()})

    def input_json(self) -> str:
        """:meth:`event` as compact JSON, keys sorted."""
        return json.dumps(self.event(), separators=(",", ":"), sort_keys=True)


Target = ExtractionTarget | ConsolidationTarget
"""What a schedule runs: a session's extraction or an actor's consolidation."""


def schedule_name(target: Target) -> str:
    """The session's schedule name: ``kvm-`` + 52 lower-case base32 characters (56 in all).

    Deterministic: the same session always gets the same name, so arming again finds the
    schedule already there (``ConflictException``) and updates it instead of adding a second.
    The name is the SHA-256 of a length-prefixed encoding of the three ids (each id's UTF-8
    bytes preceded by its length as 4 big-endian bytes), so ids can never blur into each other
    the way concatenation would let ``("a:b", "c")`` and ``("a", "b:c")`` meet.

    Injective in practice, not strictly: a session id alone may be 256 characters, so three ids
    cannot all fit into 64 characters of ``[0-9A-Za-z._-]`` (EventBridge Scheduler's limit for
    names). Two sessions share a name only on a SHA-256 collision (256 bits; none is known).
    """
    digest = hashlib.sha256()
    if isinstance(target, ConsolidationTarget):
        # Another domain string: an actor's schedule never meets a session's of the same id.
        digest.update(b"kividb-consolidation-schedule-v1\x00")
        last = target.actor_id
    else:
        digest.update(b"kividb-extraction-schedule-v1\x00")
        last = target.session_id
    for part in (target.instance_id, target.store, last):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(4, "big"))
        digest.update(data)
    encoded = base64.b32encode(digest.digest()).decode("ascii").rstrip("=").lower()
    return SCHEDULE_NAME_PREFIX + encoded


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a naive datetime has no time zone; pass an aware (UTC) datetime")
    return moment.astimezone(UTC)


def at_expression(moment: datetime) -> str:
    """EventBridge Scheduler's one-time expression for ``moment``: ``at(YYYY-MM-DDThh:mm:ss)``
    in UTC (send it with ``ScheduleExpressionTimezone="UTC"``).

    The expression has whole seconds, so a fractional second rounds UP (12:00:00.000 stays,
    12:00:00.001 becomes 12:00:01): a schedule never fires before ``moment``. ``ValueError``
    for a naive datetime, or one that rounds past year 9999.
    """
    utc = _utc(moment)
    if utc.microsecond:
        try:
            utc = utc.replace(microsecond=0) + timedelta(seconds=1)
        except OverflowError as exc:
            raise ValueError("the time is out of range") from exc
    return (
        f"at({utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d})"
    )


class Scheduler(Protocol):
    """Port: arm a session's one-shot extraction, or run it as soon as possible."""

    def arm(self, target: Target, due: datetime) -> None:
        """Create the session's one-shot schedule at ``due`` (aware datetime), or move the one
        it has to ``due``. A session has at most one. ``SchedulerUnavailable`` on failure."""
        ...

    def run_now(self, target: Target) -> None:
        """Start the session's extraction as soon as possible, asynchronously (returns before
        it runs). ``SchedulerUnavailable`` on failure."""
        ...


# --- AWS: EventBridge Scheduler + Lambda ---------------------------------------------------


@lru_cache(maxsize=4)
def _aws_client(service: str) -> Any:
    """One boto3 client per service per container, built on first use (never at import).
    Timeouts stay inside a 10 s route function even when an arm takes its three calls
    (create, conflict, update): 1 s to connect, 2 s to read, and botocore's standard retry mode
    with 2 attempts (throttling and 5xx answers), so at worst about 3 x 2 x 3 s = 18 s only if
    every call times out twice, and about 3 s in the ordinary worst case of one slow call.

    boto3 and botocore are imported here, at first use: importing boto3 costs about 0.2 s, which
    routes that never schedule should not pay. (``importlib`` keeps mypy from asking for stubs
    that the layer does not ship.)"""
    boto3 = importlib.import_module("boto3")
    config = importlib.import_module("botocore.config").Config(
        connect_timeout=1, read_timeout=2, retries={"max_attempts": 2, "mode": "standard"}
    )
    return boto3.client(service, config=config)


def _error_code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class EventBridgeScheduler:
    """The AWS adapter: one-shot EventBridge Scheduler schedules in ``group`` whose target is
    the background function ``function_arn``, assumed with ``role_arn`` (the scheduler's
    execution role, which may invoke only that function); ``run_now`` invokes the function
    asynchronously (``InvocationType="Event"``).

    Clients default to cached boto3 clients of the function's region. Any AWS failure (an
    error answer, or no answer) becomes ``SchedulerUnavailable`` raised from the original.
    """

    #: create / update rounds before giving up when the schedule keeps appearing and vanishing
    MAX_ROUNDS = 3

    def __init__(
        self,
        *,
        group: str,
        function_arn: str,
        role_arn: str,
        scheduler_client: Any = None,
        lambda_client: Any = None,
    ) -> None:
        if not re.fullmatch(SCHEDULE_NAME_PATTERN, group):
            raise ValueError(f"schedule group {group!r} is not a valid group name")
        if not function_arn or not role_arn:
            raise ValueError("the background function ARN and the scheduler role ARN are required")
        self.group = group
        self.function_arn = function_arn
        self.role_arn = role_arn
        self._scheduler_client = scheduler_client
        self._lambda_client = lambda_client

    @property
    def scheduler_client(self) -> Any:
        """The boto3 ``scheduler`` client, made at first use (``_aws_client``)."""
        if self._scheduler_client is None:
            self._scheduler_client = _aws_client("scheduler")
        return self._scheduler_client

    @property
    def lambda_client(self) -> Any:
        """The boto3 ``lambda`` client, made at first use (``_aws_client``)."""
        if self._lambda_client is None:
            self._lambda_client = _aws_client("lambda")
        return self._lambda_client

    def schedule_request(self, target: Target, due: datetime) -> dict[str, Any]:
        """The full ``CreateSchedule`` / ``UpdateSchedule`` request for ``target`` at ``due``."""
        return {
            "Name": schedule_name(target),
            "GroupName": self.group,
            "ScheduleExpression": at_expression(due),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "Target": {
                "Arn": self.function_arn,
                "RoleArn": self.role_arn,
                "Input": target.input_json(),
            },
        }

    def arm(self, target: Target, due: datetime) -> None:
        """``CreateSchedule``; on ``ConflictException`` (the session has one) ``UpdateSchedule``
        with the same fields; on ``ResourceNotFoundException`` there (it fired and deleted
        itself meanwhile) create again. ``ValueError`` for a naive ``due``."""
        request = self.schedule_request(target, due)
        client = self.scheduler_client
        for _ in range(self.MAX_ROUNDS):
            if _call(
                "create the extraction schedule",
                ("ConflictException",),
                client.create_schedule,
                request,
            ):
                return
            if _call(
                "update the extraction schedule",
                ("ResourceNotFoundException",),
                client.update_schedule,
                request,
            ):
                return
        raise SchedulerUnavailable(
            "The extraction schedule kept appearing and vanishing while it was being armed; "
            "retry in a moment."
        )

    def run_now(self, target: Target) -> None:
        """Lambda ``Invoke`` of the background function with ``InvocationType="Event"``: Lambda
        queues the event and answers 202 at once; the function runs shortly after."""
        request = {
            "FunctionName": self.function_arn,
            "InvocationType": "Event",
            "Payload": target.input_json().encode("utf-8"),
        }
        _call("start the extraction", (), self.lambda_client.invoke, request)


def _call(doing: str, allow: tuple[str, ...], call: Any, request: dict[str, Any]) -> bool:
    """``call(**request)``: True when it succeeded, False when AWS answered an error whose code
    is in ``allow``. Any other error answer (``ClientError``) and any failure to get an answer
    (``BotoCoreError``: connection, timeout, credentials) is ``SchedulerUnavailable``, raised
    from the original. ``ParamValidationError`` (a request built wrongly here) is a bug and
    passes through unchanged. (botocore is imported here, not at module import: it costs about
    17 ms, which routes that never schedule should not pay.)"""
    errors = importlib.import_module("botocore.exceptions")
    try:
        call(**request)
    except errors.ClientError as exc:
        code = _error_code(exc)
        if code in allow:
            return False
        raise _unavailable(doing, code) from exc
    except errors.ParamValidationError:
        raise
    except errors.BotoCoreError as exc:
        raise _unavailable(doing, type(exc).__name__) from exc
    return True


def _unavailable(doing: str, code: str) -> SchedulerUnavailable:
    return SchedulerUnavailable(
        f"Background work could not be scheduled ({code} while trying to {doing}); "
        "retry in a moment."
    )


# --- local: Redis ------------------------------------------------------------------------

# KEYS[1] due zset (schedule name -> due ms), KEYS[2] events hash (name -> event JSON);
# ARGV[1] now (ms), ARGV[2] the most entries to take. Returns the taken events' JSON, by due
# time. Atomic (one script), so two takers never both get an entry.
_TAKE_DUE = """
local names = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local taken = {}
for _, name in ipairs(names) do
  local event = redis.call('HGET', KEYS[2], name)
  redis.call('ZREM', KEYS[1], name)
  redis.call('HDEL', KEYS[2], name)
  if event then
    taken[#taken + 1] = event
  end
end
return taken
"""

# KEYS as above; ARGV[1] name, ARGV[2] due (ms), ARGV[3] event JSON. Replaces a pending entry.
_ARM = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""


class LocalScheduler:
    """The local stack's adapter: the same port, kept in Redis (the control database).

    One entry per schedule name (:func:`schedule_name`): a sorted set of names scored by due
    time (ms since the epoch) and a hash of name -> event JSON (keys in
    :class:`agent_memory.database.keys.LocalScheduleKeys`). Arming again replaces the due time, as
    ``UpdateSchedule`` does; :meth:`take_due` removes what it returns, as
    ``ActionAfterCompletion: DELETE`` does. Due times keep their milliseconds (no rounding and
    no 60-second precision: locally a schedule fires within the loop's poll interval).

    ``keys`` defaults to the stack's one schedule namespace; tests pass their own. Database failures
    raise ``DatabaseUnavailable`` (``agent_memory.database.client.database_errors``).
    """

    def __init__(
        self, client: redis.Redis, clock: Clock, *, keys: LocalScheduleKeys | None = None
    ) -> None:
        self.client = client
        self.clock = clock
        self.keys = keys or LocalScheduleKeys()

    def arm(self, target: Target, due: datetime) -> None:
        """Keep (or move) the session's entry at ``due``. ``ValueError`` for a naive ``due``."""
        self._put(target, to_ms(_utc(due)))

    def run_now(self, target: Target) -> None:
        """Due now: the next poll takes it. An entry of its own, as Lambda's asynchronous
        invoke is apart from the session's schedule: an armed schedule stays armed."""
        name = f"{schedule_name(target)}:now:{secrets.token_hex(6)}"
        self._put(target, to_ms(_utc(self.clock.now())), name)

    def _put(self, target: Target, due_ms: int, name: str | None = None) -> None:
        with database_errors():
            script = load_script(self.client, _ARM)
            script(
                keys=[self.keys.due, self.keys.events],
                args=[name or schedule_name(target), due_ms, target.input_json()],
                client=self.client,
            )

    def take_due(self, now: datetime, limit: int = 10) -> list[dict[str, str]]:
        """Atomically remove and return the events (as :meth:`ExtractionTarget.event` gives
        them) of at most ``limit`` entries due at or before ``now``, earliest first."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        with database_errors():
            script = load_script(self.client, _TAKE_DUE)
            raw = script(
                keys=[self.keys.due, self.keys.events],
                args=[to_ms(_utc(now)), limit],
                client=self.client,
            )
        events = []
        for item in raw:
            # One malformed entry (written by hand, or by another version) is skipped with a
            # warning; it must not take the valid ones of the same batch down with it.
            try:
                text = item.decode("utf-8") if isinstance(item, bytes) else str(item)
                event = json.loads(text)
                if not isinstance(event, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                logger.warning("local scheduler: skipped a malformed entry (%s)", exc)
                continue
            events.append({str(k): str(v) for k, v in event.items()})
        return events

    def pending(self) -> dict[str, datetime]:
        """Every armed entry: schedule name -> due time (for tests and tools)."""
        with database_errors():
            entries: list[tuple[str | bytes, float]] = self.client.zrange(  # type: ignore[assignment]
                self.keys.due, 0, -1, withscores=True
            )
        result = {}
        for name, score in entries:
            key = name.decode("utf-8") if isinstance(name, bytes) else str(name)
            result[key] = datetime.fromtimestamp(float(score) / 1000, tz=UTC)
        return result


class SchedulerSettings(BaseModel):
    """Which scheduler a function uses, and its settings (``edge.settings.FunctionSettings``
    reads them from ``KIVIDB_SCHEDULER``, ``KIVIDB_SCHEDULE_GROUP``,
    ``KIVIDB_BACKGROUND_FUNCTION_ARN``, ``KIVIDB_SCHEDULER_ROLE_ARN`` and
    ``KIVIDB_CONTROL_URL``): ``kind`` ``local`` (the local stack sets it) or ``aws``."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["aws", "local"] = "aws"
    control_url: str | None = None
    schedule_group: str | None = None
    background_function_arn: str | None = None
    scheduler_role_arn: str | None = None


def make_scheduler(
    settings: SchedulerSettings,
    redis_client_for_local: Callable[[str], redis.Redis],
    clock: Clock | None = None,
) -> Scheduler:
    """The scheduler a function uses: ``kind`` local is a :class:`LocalScheduler` on the
    control database, ``redis_client_for_local(control_url)`` (e.g.
    ``agent_memory.database.client.redis_client``); aws is an :class:`EventBridgeScheduler`
    of ``schedule_group``, ``background_function_arn`` and ``scheduler_role_arn``.
    ``ValueError`` names the variables a needed setting comes from when it is unset."""
    if settings.kind == "local":
        if not settings.control_url:
            raise ValueError(f"set {CONTROL_URL_ENV} for the local scheduler")
        return LocalScheduler(redis_client_for_local(settings.control_url), clock or SystemClock())
    needed = {
        SCHEDULE_GROUP_ENV: settings.schedule_group,
        BACKGROUND_FUNCTION_ARN_ENV: settings.background_function_arn,
        SCHEDULER_ROLE_ARN_ENV: settings.scheduler_role_arn,
    }
    missing = [name for name, value in needed.items() if not value]
    if missing:
        raise ValueError("set " + ", ".join(missing) + " to schedule background work")
    return EventBridgeScheduler(
        group=str(settings.schedule_group),
        function_arn=str(settings.background_function_arn),
        role_arn=str(settings.scheduler_role_arn),
    )
