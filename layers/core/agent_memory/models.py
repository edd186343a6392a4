"""Pydantic bases and what every package shares: identifiers, limits, times, the ``Model`` /
``View`` bases, text that shows nothing, and the one error shape. Each package keeps its own
models beside its code: ``stores.models``, ``sessions.models``, ``memories.models``.

Field names follow DESIGN.md section 2 exactly; the settings and their defaults come from the
product seed's settings table (``shared/seeds/000_*.txt``). Request models forbid unknown fields,
so a misspelt setting is a 422 naming it instead of being silently ignored.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
)

if TYPE_CHECKING:
    from agent_memory.scopes import KeyScope

# --- identifiers (DESIGN section 2) ----------------------------------------------------------

PATTERN_WORDS: dict[str, str] = {}
"""What each pattern of a field asks for, in words (``said``): pattern errors give these words,
never the regular expression (``problem_in_words``)."""


def said(pattern: str, words: str) -> str:
    """``pattern``, with ``words`` (what a value must be: "letters, digits and ...") kept as
    what its errors say. Every pattern a request field is checked with is declared with it."""
    PATTERN_WORDS[pattern] = words
    return pattern


def problem_in_words(error: Mapping[str, Any]) -> str:
    """The problem of one pydantic error (an item of ``ValidationError.errors()``), for a
    person: a pattern mismatch says what the value must be in words (``PATTERN_WORDS``; a
    pattern without words says only that the form is wrong, never the regular expression);
    any other error as pydantic words it, without its "Value error, " prefix."""
    if error.get("type") == "string_pattern_mismatch":
        pattern = str((error.get("ctx") or {}).get("pattern", ""))
        words = PATTERN_WORDS.get(pattern)
        return f"must be {words}" if words else "is not in the form this field takes"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


INSTANCE_ID_PATTERN = said(
    r"^[A-Za-z0-9_\-]{1,64}$", "1 to 64 characters: letters, digits, '_' and '-'"
)
DAY_PATTERN = said(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "a day written YYYY-MM-DD")
MEMORY_ID_PATTERN = said(
    r"^mem_[0-9a-f]{20}$", "a memory id: 'mem_' and 20 lower-case hexadecimal digits"
)
CURSOR_PATTERN = said(r"^[0-9]+$", "digits only: the next_cursor the page before gave")
TYPE_NAME_PATTERN = said(
    r"^[a-z][a-z0-9_]{0,39}$",
    "1 to 40 characters: a lower-case letter, then lower-case letters, digits and '_'",
)
AWS_REGION_PATTERN = said(
    r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$", "an AWS region written like us-east-1 or eu-west-3"
)
"""A day as the usage routes take it: ``YYYY-MM-DD`` and nothing else (a number is not read
as a time since the epoch, as pydantic's lax dates would)."""


def _id_pattern(others: str, longest: int) -> str:
    """``[.{others}]{1,longest}`` except "." and "..", which every HTTP client rewrites as path
    segments. Written without look-ahead, which pydantic's (Rust) regex engine lacks."""
    chars = f"[.{others}]"
    return (
        f"^(?:[{others}]{chars}{{0,{longest - 1}}}"
        f"|\\.[{others}]{chars}{{0,{longest - 2}}}"
        f"|\\.\\.{chars}{{1,{longest - 2}}})$"
    )


STORE_NAME_PATTERN = said(
    _id_pattern(r"A-Za-z0-9_\-", 64),
    "1 to 64 characters: letters, digits, '.', '_' and '-' (not '.' or '..' alone)",
)
SESSION_ID_PATTERN = said(
    _id_pattern(r"A-Za-z0-9_:@\-", 256),
    "1 to 256 characters: letters, digits, '.', '_', ':', '@' and '-' (not '.' or '..' alone)",
)

StoreName = Annotated[str, StringConstraints(pattern=STORE_NAME_PATTERN)]
SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]
ActorId = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]
InstanceId = Annotated[str, StringConstraints(pattern=INSTANCE_ID_PATTERN)]

RESERVED_TYPES = ("semantic", "episodic")

# --- limits (documented in docs/limits.md) ---------------------------------------------------

MAX_EVENTS_PER_CALL = 100
MAX_MESSAGE_CHARS = 32_000
MAX_NAME_CHARS = 128
MAX_QUERY_CHARS = 8_000
MAX_RECENT = 1000
DEFAULT_RECENT = 50
MAX_PAGE = 100
DEFAULT_PAGE = 20
MAX_OFFSET = 1_000_000_000


EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


_NUMERIC = re.compile(r"^\s*[+-]?\d+(\.\d*)?\s*$")


def _iso_text(value: Any) -> Any:
    # Numbers (or digit strings) would be read as seconds or milliseconds depending on their
    # size; ask for ISO 8601 text instead.
    if not isinstance(value, str | datetime) or (isinstance(value, str) and _NUMERIC.match(value)):
        raise ValueError("give a date and time as ISO 8601 text, e.g. 2023-05-08T13:56:00Z")
    return value


def _utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted to UTC; 1900 to 9000 only."""
    try:
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 shifted past the calendar by its offset
        moment = None
    if moment is None or not EARLIEST <= moment < LATEST:
        raise ValueError("must be between 1900-01-01 and 9000-01-01")
    return moment


UtcDatetime = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_utc)]


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization an API key belongs to, which key it was, and that key's
    scope (None for the organization's admin key; ``agent_memory.scopes``)."""

    org_id: str
    key_id: str
    scope: KeyScope | None = None


class Model(BaseModel):
    """Base of request models: unknown fields are errors, and values are not coerced
    (``"yes"`` is not a boolean, ``"30"`` not an integer); only timestamps parse from text."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Powertools formats the route's arguments into a debug message on every request,
        # whatever the log level: keep that cheap (a 1,536-float vector took ~2 ms to repr).
        for name, value in super().__repr_args__():
            if isinstance(value, list) and len(value) > 8:
                yield name, f"<{len(value)} items>"
            else:
                yield name, value


class View(BaseModel):
    """Base of response and stored models."""

    model_config = ConfigDict(extra="ignore")


# --- text that shows nothing (names, memory texts, queries) -----------------------------------


# Default_Ignorable_Code_Point (Unicode 15.1, DerivedCoreProperties.txt): characters a
# renderer shows as nothing. Most are Cf; these are the others (Hangul fillers U+115F, U+1160,
# U+3164 and U+FFA0 are letters, variation selectors and the combining grapheme joiner marks),
# and the ranges reserved for more of them.
_DEFAULT_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def is_invisible(char: str) -> bool:
    """True for a character that shows nothing: white space, format characters (Cf) and every
    other Default_Ignorable_Code_Point (Unicode 15.1: Hangul fillers, variation selectors)."""
    if char.isspace() or unicodedata.category(char) == "Cf":
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _DEFAULT_IGNORABLE_RANGES)


def is_blank(value: str) -> bool:
    """True when ``value`` shows nothing: every character is white space, an invisible format
    character (Cf: zero-width space, word joiner, soft hyphen, BOM...) or another
    default-ignorable one (``is_invisible``: a Hangul filler, a variation selector)."""
    return all(is_invisible(ch) for ch in value)


# --- JSON values ------------------------------------------------------------------------------


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text: no spaces, keys in the order given, text as UTF-8 (not
    ``\\u`` escapes), so that it reads back as the same value; ``ValueError`` for a NaN or an
    infinity (JSON has neither)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_depth(value: Any) -> int:
    """How deep ``value`` nests: 0 for a scalar, 1 for a flat object or list, and so on."""
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


# --- errors ----------------------------------------------------------------------------------


class ErrorDetail(View):
    """One problem of a rejected request: the field path and what is wrong with it."""

    field: str
    problem: str


class ErrorBody(View):
    """The one error shape: ``{"error", "message", "details"?}`` (DESIGN section 2)."""

    error: str
    message: str
    details: list[ErrorDetail] | None = None


SearchMode = Literal["semantic", "keyword", "hybrid"]
"""How a search ranks: by meaning (cosine of vectors), by keyword (BM25), or both fused."""
