"""What each organization and store used, day by day (UTC), in the control database.

One hash per organization and day (``ControlKeys.usage``) holds a counter per store and kind
(``ControlKeys.usage_field``): ``route:<route key>`` for requests (counted by the authorizer
inside the script that takes the request's token, ``control.limits.TAKE``: no round trip of
its own), ``messages_added`` and ``memories_added`` (counted by the script that reserves the
daily quota before the write, ``control.limits.RESERVE``), and the rest (``COUNTERS``) added
after the fact in one pipelined step (``UsageStore.add``): memories superseded and deleted by a
route, what a background run did, and the model tokens a provider reported. Model tokens also
count towards the daily ``model_tokens`` quota there.

Counting never fails what was counted: a write that succeeded stays a success when its count
cannot be written (``UsageStore.add`` logs and goes on, whatever the database answered), so a
usage figure can be short by the requests of an outage of the control database, never long.
No count it is given can make it raise either: each is an integer brought into 0 to
``MAX_COUNT`` (``countable``), and the providers' token counts were already bounded by what
their requests could use (``providers.token_counts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import redis
from pydantic import Field
from redis.exceptions import RedisClusterException

from agent_memory.clock import Clock
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.errors import AgentMemoryError, ValidationFailed
from agent_memory.models import View

ROUTE_COUNTER = "route:"
"""Prefix of the counter of one route's requests: ``route:GET /instances/{instance_id}/...``
(API Gateway's ``routeKey``)."""
COUNTERS = (
    "messages_added",
    "memories_added",
    "memories_superseded",
    "memories_deleted",
    "extraction_runs",
    "summarization_runs",
    "llm_input_tokens",
    "llm_output_tokens",
    "embedding_tokens",
    "rerank_calls",
    "rerank_documents",
    "profile_updates",
    "consolidation_runs",
)
"""The counters of a day besides requests, as ``UsageDay`` names them."""
MODEL_TOKEN_COUNTERS = ("llm_input_tokens", "llm_output_tokens", "embedding_tokens")
"""What counts towards the daily ``model_tokens`` quota (``control.limits``)."""
KEEP_DAYS = 400
"""How long a day's usage is kept: a year and a month, for a month-over-month comparison."""
KEEP_SECONDS = KEEP_DAYS * 86_400
MAX_DAY_FIELDS = 20_000
"""The most counters one organization's day holds (stores x routes, about 40 routes a store):
past them, requests to a store not counted yet that day count under no store, so requests
naming stores that do not exist cannot grow a day without bound (a few MB at most)."""
MAX_RANGE_DAYS = 366
"""The most days one usage request may span."""
DEFAULT_RANGE_DAYS = 30
"""The days a usage request without ``from`` covers: the last 30, today included."""


MAX_COUNT = 10**15
"""The most one ``UsageStore.add`` adds to a counter: far above what one request or run can
spend (providers' counts are bounded by what was sent, ``providers.token_counts``), far below
2^63, so a counter's ``HINCRBY`` cannot overflow in millions of years of adds."""


def countable(value: object) -> int:
    """``value`` as a count to add: an integer from 0 to ``MAX_COUNT`` (larger: ``MAX_COUNT``),
    0 for anything else (negative, a float, NaN, a boolean). Never raises."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return 0
    return min(value, MAX_COUNT)


def day_key(moment: date) -> str:
    """``YYYYMMDD`` of ``moment`` (a UTC day)."""
    return moment.strftime("%Y%m%d")


class UsageDay(View):
    """One UTC day of use. ``requests`` is every request the authorizer let through, and
    ``requests_by_route`` the same by API Gateway route key; token counts are the providers'
    own (``usage`` of OpenAI's and Anthropic's answers); ``rerank_calls`` the reranker calls
    that answered and ``rerank_documents`` the candidates they were sent (hosted rerankers bill
    by these: Cohere per search of up to 100 documents, Bedrock per query)."""

    date: date
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
    rerank_calls: int
    rerank_documents: int
    profile_updates: int = Field(
        0, description="Fields of actors' profiles changed, by extraction or by a caller."
    )
    consolidation_runs: int = Field(
        0,
        description="Consolidation runs that planned (or failed); their model tokens count "
        "in llm_input_tokens and llm_output_tokens.",
    )


def parse_day(value: str | None, field: str) -> date | None:
    """The day ``value`` names (``models.DAY_PATTERN``), or None; ``ValidationFailed`` naming
    ``query.<field>`` for a day that does not exist (``2026-02-30``)."""
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationFailed(
            f"'{field}' is not a day of the calendar: {value!r}; send YYYY-MM-DD.",
            details=[{"field": f"query.{field}", "problem": "not a day of the calendar"}],
        ) from None


def day_range(first: date | None, last: date | None, today: date) -> list[date]:
    """The days from ``first`` to ``last`` inclusive (``last`` defaults to today, ``first`` to
    ``DEFAULT_RANGE_DAYS`` days before ``last``); ``ValidationFailed`` naming ``from`` or
    ``to`` when ``first`` is after ``last`` or the range spans more than ``MAX_RANGE_DAYS``."""
    last = last or today
    if first is None:
        try:
            first = last - timedelta(days=DEFAULT_RANGE_DAYS - 1)
        except OverflowError:  # within 30 days of 0001-01-01
            first = date.min
    if first > last:
        raise ValidationFailed(
            "'from' is after 'to'.", details=[{"field": "query.from", "problem": "after 'to'"}]
        )
    span = (last - first).days + 1
    if span > MAX_RANGE_DAYS:
        raise ValidationFailed(
            f"A usage request spans at most {MAX_RANGE_DAYS} days; this one spans {span}.",
            details=[
                {"field": "query.to", "problem": f"more than {MAX_RANGE_DAYS} days after 'from'"}
            ],
        )
    return [first + timedelta(days=n) for n in range(span)]


class UsageStore:
    """The usage counters of the control database. Errors: ``DatabaseUnavailable`` (reads)."""

    def __init__(self, client: redis.Redis, clock: Clock) -> None:
        self._redis = client
        self._clock = clock

    def add(
        self,
        org_id: str,
        instance_id: str,
        store: str,
        counts: Mapping[str, int],
        key_id: str | None = None,
    ) -> None:
        """Add ``counts`` (``COUNTERS`` names; zeros and unknown names are left out) to today's
        usage of the store, in one pipelined round trip; model tokens also to today's
        ``model_tokens`` quota counter of the organization (and of ``key_id``, when a request
        of that key spent them), and ``memories_added`` (which only background runs count
        here: the routes count theirs as they reserve them) to its ``memories`` counter, so
        that what extraction keeps counts against ``memories_per_day`` (it is not refused).
        Each count is taken as ``countable`` says (at most ``MAX_COUNT``). A failure is logged,
        not raised (module docstring)."""
        given = {k: n for k, v in counts.items() if k in COUNTERS and (n := countable(v))}
        if not given:
            return
        now = self._clock.now()
        day = day_key(now.date())
        usage = ControlKeys.usage(org_id, day)
        tokens = sum(given.get(k, 0) for k in MODEL_TOKEN_COUNTERS)
        try:
            with database_errors(), self._redis.pipeline(transaction=False) as pipe:
                for counter, n in given.items():
                    pipe.hincrby(usage, ControlKeys.usage_field(instance_id, store, counter), n)
                pipe.expire(usage, KEEP_SECONDS)
                quotas = [ControlKeys.quota(org_id, day)]
                if key_id:
                    quotas.append(ControlKeys.quota(org_id, day, key_id))
                for quota in quotas:
                    if tokens:
                        pipe.hincrby(quota, "model_tokens", tokens)
                    if given.get("memories_added"):
                        pipe.hincrby(quota, "memories", given["memories_added"])
                    pipe.expire(quota, 2 * 86_400)
                pipe.execute()
        except (AgentMemoryError, redis.RedisError, RedisClusterException) as exc:
            # Any answer of the database, an overflowing counter's too: never raised.
            from agent_memory.observability import logger

            code = exc.code if isinstance(exc, AgentMemoryError) else type(exc).__name__
            logger.warning(
                "usage not counted", extra={"error": code, "counts": given, "store": store}
            )

    def days(
        self, org_id: str, days: list[date], where: tuple[str, str] | None = None
    ) -> list[UsageDay]:
        """Each of ``days`` as used by the organization (``where`` None) or by one store
        (``(instance_id, store)``): one pipelined read of every day's hash."""
        prefix = ControlKeys.usage_field(*where, "") if where else None
        with database_errors(), self._redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(ControlKeys.usage(org_id, day_key(day)))
            answers = pipe.execute()
        return [_usage_day(day, raw, prefix) for day, raw in zip(days, answers, strict=True)]


def _usage_day(day: date, raw: Mapping[Any, Any], prefix: str | None) -> UsageDay:
    """A ``UsageDay`` from a day's hash: the fields of the store ``prefix`` names (every field
    when None)."""
    totals = dict.fromkeys(COUNTERS, 0)
    routes: dict[str, int] = {}
    for field, value in raw.items():
        where, _, counter = str(field).partition("|")
        if prefix is not None and f"{where}|" != prefix:
            continue
        n = int(value)
        if counter.startswith(ROUTE_COUNTER):
            route = counter.removeprefix(ROUTE_COUNTER)
            routes[route] = routes.get(route, 0) + n
        elif counter in COUNTERS:
            totals[counter] += n
    return UsageDay(
        date=day,
        requests=sum(routes.values()),
        requests_by_route=dict(sorted(routes.items())),
        **totals,
    )
