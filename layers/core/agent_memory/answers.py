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
``DEFAULT_ANSWER_BUDGET``) and say what they left out.
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
