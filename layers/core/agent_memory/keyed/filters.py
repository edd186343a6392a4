"""Which keyed memories a search or a namespace listing takes: value filters and namespace
patterns, pure functions over decoded values (no database).

A filter maps a dotted path in the value (``"user.age"``: each segment a key of an object) to
what the value there must be. The semantics are those of LangGraph's in-memory store
(``langgraph.store.memory._compare_values`` and ``_apply_operator``), which its SQL stores
approximate, with JSON's types kept apart:

- a plain JSON value: equal to it (numbers by value, ``1 == 1.0``; ``true`` is not ``1``; an
  object matches when each of its keys matches, so ``{"a": 1}`` matches ``{"a": 1, "b": 2}``;
  a list matches a list of the same length, item by item); a missing path is ``null``;
- an object of operators: every one holds. ``$eq`` / ``$ne``: equal / not equal as above;
  ``$gt``, ``$gte``, ``$lt``, ``$lte``: a number against a number, or a string against a string
  (by code point); any other pair never matches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agent_memory.errors import ValidationFailed
from agent_memory.keyed.models import MAX_FILTER_PATH_CHARS, WILDCARD

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_MISSING = None


def _invalid(path: str, problem: str) -> ValidationFailed:
    return ValidationFailed(
        f"Invalid filter key {path!r}: {problem}; nothing was searched.",
        details=[{"field": f"filter.{path}", "problem": problem}],
    )


def check_filter(conditions: Mapping[str, Any] | None) -> None:
    """``ValidationFailed`` (naming the condition) unless every path of ``conditions`` is 1 to
    ``MAX_FILTER_PATH_CHARS`` characters of non-empty dot-separated segments, and every operator
    object holds only ``OPERATORS`` (an object with some ``$`` keys must hold only those)."""
    for path, wanted in (conditions or {}).items():
        if not path or len(path) > MAX_FILTER_PATH_CHARS:
            raise _invalid(path, f"a path is 1 to {MAX_FILTER_PATH_CHARS} characters")
        if any(segment == "" for segment in path.split(".")):
            raise _invalid(path, "each dot-separated segment of a path must be non-empty")
        if isinstance(wanted, dict) and any(str(k).startswith("$") for k in wanted):
            unknown = [k for k in wanted if k not in OPERATORS]
            if unknown:
                raise _invalid(
                    path, f"unknown operator {unknown[0]!r}; use one of {', '.join(OPERATORS)}"
                )


def value_at(value: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``value``; ``None`` where it is missing."""
    current = value
    for segment in path.split("."):
        if not isinstance(current, dict) or segment not in current:
            return _MISSING
        current = current[segment]
    return current


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(stored: Any, wanted: Any) -> bool:
    """Whether ``stored`` matches the plain JSON value ``wanted`` (module docstring)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(
            json_equal(stored.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(wanted)
            and all(json_equal(s, w) for s, w in zip(stored, wanted, strict=True))
        )
    if _number(wanted):
        return _number(stored) and stored == wanted
    if isinstance(wanted, bool):
        return isinstance(stored, bool) and stored is wanted
    if wanted is None:
        return stored is None
    return isinstance(stored, str) and stored == wanted


def _ordered(stored: Any, operator: str, operand: Any) -> bool:
    if _number(stored) and _number(operand):
        left, right = float(stored), float(operand)
        if math.isnan(left) or math.isnan(right):
            return False
    elif isinstance(stored, str) and isinstance(operand, str):
        left, right = stored, operand  # type: ignore[assignment]
    else:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def _holds(stored: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return json_equal(stored, operand)
    if operator == "$ne":
        return not json_equal(stored, operand)
    return _ordered(stored, operator, operand)


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` satisfies every condition of a filter ``check_filter`` accepted."""
    for path, wanted in (conditions or {}).items():
        stored = value_at(value, path)
        if isinstance(wanted, dict) and wanted and all(k in OPERATORS for k in wanted):
            if not all(_holds(stored, op, operand) for op, operand in wanted.items()):
                return False
        elif not json_equal(stored, wanted):
            return False
    return True


def under_prefix(namespace: Sequence[str], prefix: Sequence[str]) -> bool:
    """Whether ``namespace`` starts with the labels of ``prefix`` (whole labels, compared
    exactly; an empty prefix takes every namespace)."""
    return len(namespace) >= len(prefix) and list(namespace[: len(prefix)]) == list(prefix)


def _fits(labels: Sequence[str], pattern: Sequence[str]) -> bool:
    return all(p in (WILDCARD, label) for label, p in zip(labels, pattern, strict=True))


def listed(
    namespace: Sequence[str], prefix: Sequence[str] | None, suffix: Sequence[str] | None
) -> bool:
    """Whether a namespace listing with ``prefix`` and ``suffix`` (``*`` any one label) takes
    ``namespace``."""
    if prefix and (len(namespace) < len(prefix) or not _fits(namespace[: len(prefix)], prefix)):
        return False
    return not suffix or (
        len(namespace) >= len(suffix) and _fits(namespace[len(namespace) - len(suffix) :], suffix)
    )
