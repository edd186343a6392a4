"""Limits of an organization and of its keys: requests per second (a token bucket with a
burst), what may be added per day (messages, memories) and the model tokens spent per day,
kept in the control database so that every container shares them.

Every limit has a generous default (``DEFAULT_*``, docs/keys.md "Limits"); ``tools.admin
set-limits`` sets an organization's own, and optionally a key's, which then applies on top of
the organization's (a request must fit both). The request bucket is taken by the authorizer in
one script (``TAKE``: both buckets, with the limits read in the same step), one round trip more
than authenticating, or the only one when the container has seen the key before (the script
then checks the key's record itself: ``take``'s ``key_record``); the daily quotas by the routes
that add (``reserve``), in one script too, before they write. The same scripts count the
request and what is added in the day's usage (``control.usage``), so usage costs no round trip
of its own there.

Model tokens are counted after they are spent (``control.usage.UsageStore.add``: the provider
says how many only in its answer), so the quota stops what would spend more once it is used
up: a background run (``check_model_tokens``), and a route adding memories to a store that
embeds them (``reserve`` with ``embeds``). A day can end a little over the quota by what the
calls already under way spend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import redis
from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import RedisClusterException

from agent_memory.clock import Clock, to_ms
from agent_memory.control.usage import KEEP_SECONDS, MAX_DAY_FIELDS
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.database.scripts import WRITES, load_script
from agent_memory.errors import (
    AgentMemoryError,
    DatabaseUnavailable,
    QuotaExceeded,
    RateLimited,
    ValidationFailed,
)

QUOTA_KINDS = ("messages", "memories")
MODEL_TOKENS = "model_tokens"
"""The quota counter of model tokens (language-model input and output, and embeddings)."""


MIN_REQUESTS_PER_SECOND = 0.001
"""The slowest request rate a limit may set: one request every 1,000 s. With the most burst
(``MAX_BURST``) a bucket then lives ``MAX_BURST / MIN_REQUESTS_PER_SECOND`` s (10^13 ms, about
317 years), an integer a Lua number holds exactly (below 2^53) and ``PEXPIRE`` takes; the
longest wait ``TAKE`` answers is ``1 / MIN_REQUESTS_PER_SECOND`` s. A smaller rate (1e-17) made
that expiry 10^23 ms: ``PEXPIRE`` failed after the bucket was written and the wait came back
as -2^63 (issue 32)."""
MAX_REQUESTS_PER_SECOND = 1_000_000.0
MAX_BURST = 10_000_000
MAX_PER_DAY = 10**12
"""The most messages or memories a day's quota may allow (far below 2^53: a Lua number counts
them exactly)."""
MAX_MODEL_TOKENS_PER_DAY = 10**15
RANGES: dict[str, tuple[float, float]] = {
    "requests_per_second": (MIN_REQUESTS_PER_SECOND, MAX_REQUESTS_PER_SECOND),
    "burst": (1, MAX_BURST),
    "messages_per_day": (0, MAX_PER_DAY),
    "memories_per_day": (0, MAX_PER_DAY),
    "model_tokens_per_day": (0, MAX_MODEL_TOKENS_PER_DAY),
}
"""Each limit's allowed values, both ends included: what ``TAKE`` and ``RESERVE`` compute
with stays within what a Lua number (a double) holds exactly and what Redis takes as an
integer (docs/keys.md, "Limits")."""


class Limits(BaseModel):
    """Limits as set (None: not set here, so the default or the organization's applies), each
    within ``RANGES`` (``limits_from`` says which is not, in words)."""

    model_config = ConfigDict(extra="forbid")

    requests_per_second: float | None = Field(
        None, ge=MIN_REQUESTS_PER_SECOND, le=MAX_REQUESTS_PER_SECOND, allow_inf_nan=False
    )
    burst: int | None = Field(None, ge=1, le=MAX_BURST)
    messages_per_day: int | None = Field(None, ge=0, le=MAX_PER_DAY)
    memories_per_day: int | None = Field(None, ge=0, le=MAX_PER_DAY)
    model_tokens_per_day: int | None = Field(None, ge=0, le=MAX_MODEL_TOKENS_PER_DAY)


def limits_from(given: Mapping[str, object]) -> Limits:
    """``Limits`` of ``given`` (``RANGES`` names; None: not set), or ``ValidationFailed``
    naming every field out of its range (or not a number) and the range in words, with
    ``details`` ``[{"field", "problem"}]``. Nothing is set then."""
    problems = []
    for field, value in given.items():
        if value is None:
            continue
        if field not in RANGES:
            problems.append((field, "not a limit"))
            continue
        low, high = RANGES[field]
        whole = field != "requests_per_second"
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        fits = number is not None and low <= number <= high  # NaN is in no range
        if not fits or (whole and not float(number or 0).is_integer()):
            kind = "a whole number" if whole else "a number"
            problems.append((field, f"must be {kind} from {_said(low)} to {_said(high)}"))
    if problems:
        said = "; ".join(f"{field} {problem}" for field, problem in problems)
        raise ValidationFailed(
            f"Limits out of range: {said}. Nothing was set.",
            details=[{"field": field, "problem": problem} for field, problem in problems],
        )
    return Limits.model_validate({k: v for k, v in given.items() if v is not None})


def _said(number: float) -> str:
    """``number`` as a person writes it: ``1,000,000``, ``0.001``."""
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


DEFAULT_REQUESTS_PER_SECOND = 1000.0
DEFAULT_BURST = 2000
DEFAULT_PER_DAY = {"messages": 10_000_000, "memories": 1_000_000, MODEL_TOKENS: 10**10}
"""An organization's limits when none are set: far above what one tenant of a service of
this size sends (docs/keys.md); a key's are unset (only its organization's apply)."""

TAKE = (
    WRITES
    + """
-- KEYS: org limits, key limits, org bucket, key bucket, usage day. ARGV: now (ms), default
-- rate, default burst, usage field ('' for none), usage ttl (s), the field of no store, the
-- most fields of a day. Takes one token from both
-- buckets and counts the request in the usage field, or does nothing: returns 0, or
-- {wait ms, which}. With KEYS[6], the API key's record, and ARGV[8..10], the organization, key
-- id and scope text the caller holds for that key: only if the record still says exactly that
-- (else {-1, 'stale'}, nothing taken), so a revoked or changed key is never let through.
if KEYS[6] then
  local found = redis.call('HMGET', KEYS[6], 'org_id', 'key_id', 'scope')
  if found[1] ~= ARGV[8] or found[2] ~= ARGV[9] or (found[3] or '') ~= ARGV[10] then
    return {-1, 'stale'}
  end
end
local now = tonumber(ARGV[1])
-- Limits are set within control.limits.RANGES; one written otherwise (by hand, or before
-- they were checked) is brought into them, so that no expiry or wait leaves what a Lua number
-- and Redis hold exactly (a rate of 1e-17 once made PEXPIRE fail after the HSET).
local function within(x, low, high)
  if x ~= x or x < low then return low end
  if x > high then return high end
  return x
end
local function limits(key)
  local set = redis.call('HMGET', key, 'requests_per_second', 'burst')
  local rate, burst = tonumber(set[1]), tonumber(set[2])
  if rate then rate = within(rate, @MIN_RATE@, @MAX_RATE@) end
  if burst then burst = within(math.floor(burst), 1, @MAX_BURST@) end
  return rate, burst
end
local org_rate, org_burst = limits(KEYS[1])
org_rate, org_burst = org_rate or tonumber(ARGV[2]), org_burst or tonumber(ARGV[3])
local key_rate, key_burst = limits(KEYS[2])
local function level(key, rate, burst)
  local state = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens = within(tonumber(state[1]) or burst, 0, burst)
  local ts = tonumber(state[2]) or now
  if ts ~= ts then ts = now end
  if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000) end
  return tokens
end
local buckets = {{KEYS[3], org_rate, org_burst, 'requests_per_second'}}
if key_rate then
  key_burst = key_burst or math.max(1, math.ceil(key_rate))
  buckets[2] = {KEYS[4], key_rate, key_burst, 'key.requests_per_second'}
end
local levels = {}
for i, b in ipairs(buckets) do
  levels[i] = level(b[1], b[2], b[3])
  if levels[i] < 1 then
    return {math.ceil((1 - levels[i]) * 1000 / b[2]), b[4]}
  end
end
for i, b in ipairs(buckets) do
  redis.call('HSET', b[1], 'tokens', tostring(levels[i] - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', b[1], math.ceil(b[3] * 1000 / b[2]) + 1000)
end
if ARGV[4] ~= '' then
  local field = ARGV[4]
  -- A day holds at most ARGV[7] fields: past them a new store's requests count under no store
  -- (ARGV[6]), so requests naming stores that do not exist cannot grow it without bound.
  if redis.call('HEXISTS', KEYS[5], field) == 0
      and redis.call('HLEN', KEYS[5]) >= tonumber(ARGV[7]) then
    field = ARGV[6]
  end
  redis.call('HINCRBY', KEYS[5], field, 1)
  redis.call('EXPIRE', KEYS[5], tonumber(ARGV[5]))
end
return 0
""".replace("@MIN_RATE@", repr(MIN_REQUESTS_PER_SECOND))
    .replace("@MAX_RATE@", repr(MAX_REQUESTS_PER_SECOND))
    .replace("@MAX_BURST@", str(MAX_BURST))
)

RESERVE = (
    WRITES
    + """
-- KEYS: org limits, key limits, org day, key day, usage day. ARGV: kind, n, default limit,
-- ttl (s), usage field, usage ttl (s), '1' to also require model tokens left, their default
-- limit. Counts n more of kind for the day in both and in the usage field, or nothing: 0, or
-- {which, limit}.
local n = tonumber(ARGV[2])
local function over(kind, more, default)
  local field = kind .. '_per_day'
  local org_limit = tonumber(redis.call('HGET', KEYS[1], field)) or tonumber(default)
  local org_used = tonumber(redis.call('HGET', KEYS[3], kind)) or 0
  if org_used + more > org_limit then return {field, tostring(org_limit)} end
  local key_limit = tonumber(redis.call('HGET', KEYS[2], field))
  if key_limit then
    local key_used = tonumber(redis.call('HGET', KEYS[4], kind)) or 0
    if key_used + more > key_limit then return {'key.' .. field, tostring(key_limit)} end
  end
  return false
end
local refused = over(ARGV[1], n, ARGV[3])
if not refused and ARGV[7] == '1' then
  -- Tokens are counted once spent: none may be left to spend (used + 1 over the limit).
  refused = over('model_tokens', 1, ARGV[8])
end
if refused then return refused end
for i = 3, 4 do
  if i == 3 or redis.call('HEXISTS', KEYS[2], ARGV[1] .. '_per_day') == 1 then
    redis.call('HINCRBY', KEYS[i], ARGV[1], n)
    redis.call('EXPIRE', KEYS[i], tonumber(ARGV[4]))
  end
end
redis.call('HINCRBY', KEYS[5], ARGV[5], n)
redis.call('EXPIRE', KEYS[5], tonumber(ARGV[6]))
return 0
"""
)


NOT_TAKEN = (
    "The request could not be counted against its rate limit (the control database did not "
    "take it); nothing was done. Retry in a moment."
)


def _without_store(usage_field: str) -> str:
    """``usage_field`` counted under no store (``ControlKeys.usage_field`` of ``-``)."""
    _, _, counter = usage_field.partition("|")
    return ControlKeys.usage_field("", "", counter)


def _day(moment: datetime) -> str:
    return moment.strftime("%Y%m%d")


def _until_tomorrow(moment: datetime) -> int:
    """Whole seconds from ``moment`` to the next midnight UTC (at least 1)."""
    tomorrow = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, math.ceil((tomorrow - moment).total_seconds()))


class LimitStore:
    """The limits and their counters in the control database. Errors: ``RateLimited``,
    ``QuotaExceeded``, ``DatabaseUnavailable``."""

    def __init__(self, client: redis.Redis, clock: Clock) -> None:
        self._redis = client
        self._clock = clock

    def set(self, org_id: str, limits: Limits, key_id: str | None = None) -> Limits:
        """Set the limits given (the fields left None stay as they were); the limits as set
        now."""
        key = ControlKeys.limits(org_id, key_id)
        given = limits.model_dump(exclude_none=True)
        with database_errors():
            if given:
                self._redis.hset(key, mapping={k: str(v) for k, v in given.items()})
            raw = self._redis.hgetall(key)
        return _limits(raw)

    def get(self, org_id: str, key_id: str | None = None) -> Limits:
        """The limits set for the organization (or key); None where not set."""
        with database_errors():
            raw = self._redis.hgetall(ControlKeys.limits(org_id, key_id))
        return _limits(raw)

    def take(
        self,
        org_id: str,
        key_id: str,
        usage_field: str = "",
        *,
        key_record: tuple[str, str] | None = None,
    ) -> bool:
        """One request of ``key_id`` of ``org_id``: ``RateLimited`` (with the wait) when the
        organization's or the key's bucket is empty; nothing is taken then. Else the request
        is counted in today's usage under ``usage_field`` (``ControlKeys.usage_field`` of a
        ``route:`` counter; empty: not counted).

        ``key_record``: the API key's record (``ControlKeys.api_key``) and the scope text the
        caller read there before; the step then first checks, in the same script, that the
        record still names this organization, key and scope, and takes nothing when it does not
        (a revoked key). Returns False then; True otherwise.

        Fails closed: ``DatabaseUnavailable`` (503 with ``Retry-After``) when the step cannot
        be taken for any reason (the database cannot be reached, refuses writes, or answers an
        error or something else than the script's answers), so no request goes through
        uncounted."""
        now = self._clock.now()
        keys = [
            ControlKeys.limits(org_id),
            ControlKeys.limits(org_id, key_id),
            ControlKeys.bucket(org_id),
            ControlKeys.bucket(org_id, key_id),
            ControlKeys.usage(org_id, _day(now)),
        ]
        checked: list[str] = []
        if key_record is not None:
            keys.append(key_record[0])
            checked = [org_id, key_id, key_record[1]]
        args: list[str | int | float] = [
            to_ms(now),
            DEFAULT_REQUESTS_PER_SECOND,
            DEFAULT_BURST,
            usage_field,
            KEEP_SECONDS,
            _without_store(usage_field),
            MAX_DAY_FIELDS,
            *checked,
        ]
        # Fail closed: a request that could not be taken from its buckets and counted is
        # refused (503 with Retry-After), never let through uncounted -- also while the
        # control database refuses writes (full, or a replica being promoted).
        try:
            with database_errors():
                answer = load_script(self._redis, TAKE)(keys=keys, args=args)
        except AgentMemoryError:
            raise
        except (redis.RedisError, RedisClusterException) as exc:
            raise DatabaseUnavailable(NOT_TAKEN) from exc
        if answer == 0:
            return True
        if not (isinstance(answer, list) and len(answer) == 2):
            raise DatabaseUnavailable(NOT_TAKEN)
        which = answer[1].decode() if isinstance(answer[1], bytes) else str(answer[1])
        if which == "stale":
            return False
        wait_ms = int(answer[0])
        if wait_ms <= 0 or which not in ("requests_per_second", "key.requests_per_second"):
            raise DatabaseUnavailable(NOT_TAKEN)
        raise RateLimited(
            f"Too many requests: over the {which.replace('_', ' ')} limit; retry after the "
            "Retry-After seconds.",
            math.ceil(wait_ms / 1000),
            which,
        )

    def reserve(
        self,
        org_id: str,
        key_id: str,
        kind: str,
        count: int,
        store: tuple[str, str],
        *,
        embeds: bool = False,
    ) -> None:
        """Count ``count`` more ``kind`` (``messages`` or ``memories``) added today (UTC) by
        the organization and the key, and in the usage of ``store`` (``(instance_id, name)``:
        ``<kind>_added``), or ``QuotaExceeded`` (nothing counted) when that would pass a daily
        quota; with ``embeds`` (the store embeds what is added) also when no model token is
        left today. Counted before the write: a write that then fails still counts."""
        if count <= 0:
            return
        now = self._clock.now()
        day = _day(now)
        keys = [
            ControlKeys.limits(org_id),
            ControlKeys.limits(org_id, key_id),
            ControlKeys.quota(org_id, day),
            ControlKeys.quota(org_id, day, key_id),
            ControlKeys.usage(org_id, day),
        ]
        field = ControlKeys.usage_field(*store, f"{kind}_added")
        args: list[str | int | float] = [
            kind,
            count,
            DEFAULT_PER_DAY[kind],
            2 * 86_400,
            field,
            KEEP_SECONDS,
            "1" if embeds else "0",
            DEFAULT_PER_DAY[MODEL_TOKENS],
        ]
        with database_errors():
            answer = load_script(self._redis, RESERVE)(keys=keys, args=args)
        if not isinstance(answer, list):
            return
        raise _quota_exceeded(str(answer[0]), str(answer[1]), now)

    def check_model_tokens(self, org_id: str) -> None:
        """``QuotaExceeded`` when the organization has spent its model tokens of today (UTC):
        what a background run asks before it calls a model."""
        now = self._clock.now()
        day = _day(now)
        with database_errors(), self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(ControlKeys.limits(org_id), f"{MODEL_TOKENS}_per_day")
            pipe.hget(ControlKeys.quota(org_id, day), MODEL_TOKENS)
            limit_set, used = pipe.execute()
        limit = int(limit_set) if limit_set is not None else DEFAULT_PER_DAY[MODEL_TOKENS]
        if int(used or 0) >= limit:
            raise _quota_exceeded(f"{MODEL_TOKENS}_per_day", str(limit), now)


def _quota_exceeded(which: str, limit: str, now: datetime) -> QuotaExceeded:
    """The refusal of a daily quota ``which`` (``key.`` first for a key's) of ``limit``."""
    tokens = which.endswith(f"{MODEL_TOKENS}_per_day")
    what = "is used up" if tokens else "would be passed by this request"
    return QuotaExceeded(
        f"The daily quota of {which.removeprefix('key.').replace('_', ' ')} ({limit}"
        f"{' for this key' if which.startswith('key.') else ''}) {what}; "
        "nothing was added. It starts again at midnight UTC.",
        _until_tomorrow(now),
        which,
    )


def _limits(raw: Mapping[Any, Any]) -> Limits:
    """Limits from their hash (the control client answers text), each brought into its range
    (``RANGES``) as ``TAKE`` does: what applies, also for a value written before limits were
    checked; one that is not a number is left out (its default applies)."""
    found: dict[str, float] = {}
    for key, value in raw.items():
        field = str(key)
        try:
            number = float(value)
        except ValueError:
            continue
        if field in RANGES:
            low, high = RANGES[field]
            number = low if math.isnan(number) else min(max(number, low), high)
            found[field] = number if field == "requests_per_second" else math.floor(number)
    return Limits.model_validate(found)
