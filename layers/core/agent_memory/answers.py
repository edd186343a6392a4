"""What an answer may weigh: Lambda refuses a synchronous function's response over 6 MB, so
every answer of the API is kept under a byte budget, measured as Lambda carries it.

A function's response is the JSON of ``{"statusCode", "headers", "body": "<the answer>"}``,
written by the Python 3.12 runtime with ``ensure_ascii=False`` (aws-lambda-python-runtime-
interface-client, ``lambda_runtime_marshaller.Encoder``): the answer's JSON text becomes a JSON
string, its non-ASCII characters kept as UTF-8, its quotes and backslashes escaped once more.
Lambda's quota for that payload is 6 MB, 6,291,456 bytes ("Lambda quotas", "Invocation payload
(request and response)"); over it the invocation fails and API Gateway answers 500 for every
call, so a session that outgrew it could never be recalled again. ``wire_bytes`` measures an
answer that way; the routes that can grow (recall, a session, export pages) cut what they hold
to ``budget`` bytes (``edge.settings.FunctionSettings.answer_budget_bytes``, default
``DEFAULT_ANSWER_BUDGET``) and say what they left out; every listing pages by bytes as well as
by count and says how to get the rest (a ``next_cursor`` or ``next_offset``).

One place holds every answer to the budget whatever the route: the resolver
(``edge.resolver.Api``) measures the encoded body with ``over_budget`` after the route has
answered, and answers one over it with a 409 ``answer_too_large`` in words instead (a route
whose answer cannot be paged: never a 500 from Lambda). Routes that page cut before that
(``largest_fitting``, ``items_that_fit``), so the check is a backstop that a test of every
route (``tests/e2e/test_every_route_budget.py``) shows is never reached by a listing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

View = TypeVar("View", bound=BaseModel)

LAMBDA_PAYLOAD_LIMIT = 6_291_456
"""Lambda's limit of a synchronous invocation's response payload, bytes."""
DEFAULT_ANSWER_BUDGET = 5_000_000
"""The default budget of an answer's body, bytes: what is left of the limit after the
response's envelope and headers, with a margin for the small differences between pydantic's
JSON and the resolver's."""
MIN_ANSWER_BYTES = 1_048_576
"""The least budget an answer may be given (the setting, recall's ``max_bytes``): room for
an answer's fixed part (a summary of up to 8,000 characters: under 100 kB carried) and one
item of a list, which is never cut (a message of up to 32,000 characters: under 400 kB; a
memory as lists show it, without versions: under 80 kB). An answer of one memory with its
versions (GET of a memory) is not cut at all: it stays under Lambda's limit whatever the
budget (``tests/unit/test_answers.py`` builds the largest of each)."""
MAX_EXPANSION = 12
"""At most how many bytes one character of a caller's text becomes in a carried answer: a
control character is 6 (``\\u0001``) in the JSON of the answer and in recall's ``context``
(where it is quoted, then JSON-escaped: 7), and its backslash is escaped once more in the
response payload; a text may appear twice in one answer (a message in ``messages`` and in
``context``). Texts of fewer than ``budget // MAX_EXPANSION`` characters in all always fit."""


def wire_bytes(view: BaseModel) -> int:
    """The bytes ``view`` takes in a Lambda response payload: its JSON, as a JSON string
    written without ASCII escapes, in UTF-8."""
    text = view.model_dump_json()
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


CARRIED_BYTES_PER_CHARACTER = 6
"""The most bytes one character of an answer's JSON text takes in the response payload: a
control character is written ``\\u0001`` (6), a quote or backslash 2, any other character at
most 4 in UTF-8 (a lone surrogate 3)."""


def carried_bytes(body: str) -> int:
    """The bytes ``body`` (an answer's JSON text, as the resolver encoded it) takes in a Lambda
    response payload: as a JSON string without ASCII escapes, in UTF-8."""
    return len(json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def answer_ceiling(budget: int) -> int:
    """The most an answer's body may carry under ``budget``: the budget and 1/64 of it
    (78,125 bytes for the default budget, still 1.2 MB under Lambda's limit). The routes cut
    their answers to ``budget`` as pydantic writes them (``wire_bytes``); the resolver writes
    the same values with Python's ``json``, whose floats can take a character more (``1e-07``
    for pydantic's ``1e-7``), so a page cut to the very byte may come out a little over."""
    return budget + budget // 64


def over_budget(body: str, budget: int) -> int | None:
    """``carried_bytes(body)`` when it is over ``answer_ceiling(budget)``, else None. One
    ``len`` for an answer that surely fits (at most ``CARRIED_BYTES_PER_CHARACTER`` bytes a
    character, so under a sixth of the budget in characters: every answer but the largest);
    the others are measured (a few milliseconds for 5 MB)."""
    if (len(body) + 2) * CARRIED_BYTES_PER_CHARACTER <= budget:
        return None
    carried = carried_bytes(body)
    return carried if carried > answer_ceiling(budget) else None


def surely_fits(characters: int, budget: int) -> bool:
    """Whether an answer holding ``characters`` characters of texts in all (each counted as
    often as it appears) fits ``budget`` whatever they are, without measuring it: the cheap
    check that spares the common answer its measurement. Leaves 64 KB for everything else the
    answer holds (ids, times, field names)."""
    return characters * MAX_EXPANSION + 65_536 <= budget


def largest_fitting(build: Callable[[int], View], most: int, budget: int) -> tuple[View, int]:
    """``(build(n), n)`` for the largest ``n`` in ``0..most`` whose answer fits ``budget``
    (``wire_bytes``), where ``build(n)`` is the answer holding ``n`` of its ``most`` items and
    grows with ``n``. The whole answer is measured once; only one over the budget is searched
    (bisection: about ``log2(most)`` more builds). When even ``build(0)`` is over the budget,
    that is what is returned: the caller's limits must keep the fixed part well under it."""
    whole = build(most)
    if most == 0 or wire_bytes(whole) <= budget:
        return whole, most
    low, high = 0, most  # build(high) is over the budget; build(low) is what is returned
    while high - low > 1:
        middle = (low + high) // 2
        if wire_bytes(build(middle)) <= budget:
            low = middle
        else:
            high = middle
    return build(low), low


def page_within(build: Callable[[int], View], most: int, budget: int) -> View:
    """The page of a listing: ``largest_fitting(build, most, budget)``'s answer, but holding at
    least one item when there is any, so that a listing always moves on (an item that alone is
    over the budget is then the resolver's 409 ``answer_too_large``, never a page that names
    itself as the next). ``build(n)``: the page of the listing's first ``n`` items, with the
    cursor of the items after them."""
    page, count = largest_fitting(build, most, budget)
    return build(1) if count == 0 and most > 0 else page
