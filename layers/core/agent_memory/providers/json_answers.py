"""Finding the JSON object in a language model's answer: a bare object, one in a Markdown code
fence or surrounded by prose; never text of the answer in an error (it may hold user data).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_memory.errors import ModelAnswerInvalid

_DECODER = json.JSONDecoder()
# The decoder's reasons are fixed phrases of Python's json module ("Expecting ',' delimiter");
# anything else is not repeated, since it could hold text of the answer.
_DECODER_REASON = re.compile(r"[A-Z][A-Za-z ',:\\]{0,79}")
_OPENER = re.compile(r"[{\[]")
_JSON_KINDS = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def parse_json_object(text: str) -> dict[str, Any]:
    """The first complete top-level JSON object in a model's answer.

    Accepted: a bare object (``{"summary": "..."}``), one inside a Markdown code fence
    (```` ```json ... ``` ```` or a bare ```` ``` ````), one surrounded by prose ("Here you go:
    {...} Hope this helps"). Scanning goes left to right from each ``{`` outside any object
    already seen, decoding with ``json.JSONDecoder.raw_decode``; a ``{...}`` that does not decode
    (prose in braces, single quotes, a trailing comma) is skipped as a whole, so an object
    nested in it is never picked instead. A JSON array at the top level (``[{...}]``) is skipped
    as a whole too: the answer must be an object.

    Raises ``ModelAnswerInvalid`` saying what was wrong, never quoting the answer: an empty
    answer; no JSON object (prose only); a truncated JSON object (a ``{`` that never closes,
    the usual sign of an answer cut off at its token limit); invalid JSON (with the decoder's
    reason, line and column); a JSON array, string, number, boolean or null instead of an
    object.
    """
    found = find_json_object(text)
    if isinstance(found, str):
        raise ModelAnswerInvalid(f"The model answered with {found}.")
    return found


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD. JSON
    lets a model write ``"\\ud800"``, which decodes to a code point no UTF-8 can hold; kept as
    it is, it failed the run at the first write of the answer, again on every retry."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_unicode(item) for item in value]
    return value


def find_json_object(text: str) -> dict[str, Any] | str:
    """The object ``parse_json_object`` returns (its strings valid Unicode, see
    ``_valid_unicode``), or the phrase naming what was wrong."""
    try:
        found = _scan_for_json_object(text)
        return found if isinstance(found, str) else _valid_unicode(found)
    except RecursionError:  # nesting deeper than Python's decoder can follow
        return "JSON nested too deeply to read"


def _scan_for_json_object(text: str) -> dict[str, Any] | str:
    if not text.strip():
        return "an empty answer"
    try:
        whole = json.loads(text)
    except ValueError:
        pass
    else:
        if isinstance(whole, dict):
            return whole
        if not isinstance(whole, list):
            return f"a JSON {_JSON_KINDS.get(type(whole), 'value')}, not an object"
    invalid: json.JSONDecodeError | None = None
    saw_array = False
    position = 0
    while match := _OPENER.search(text, position):
        start = match.start()
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if text[start] == "[" and not _looks_like_array(text, start):
                position = start + 1  # prose such as "[1]" or "[note"
                continue
            invalid = invalid or exc
            close = _closing(text, start)
            if close is None:  # never closes: everything after it is inside it
                return f"a truncated JSON {'object' if text[start] == '{' else 'array'}"
            position = close + 1
            continue
        if isinstance(value, dict):
            return value
        saw_array = True
        position = end
    if invalid is not None:
        reason = invalid.msg if _DECODER_REASON.fullmatch(invalid.msg) else "a decoding error"
        return f"invalid JSON ({reason} at line {invalid.lineno} column {invalid.colno})"
    if saw_array:
        return "a JSON array, not an object"
    return "no JSON object"


def _looks_like_array(text: str, start: int) -> bool:
    """Whether the ``[`` at ``start`` opens what is meant as a JSON array of objects or arrays
    (next non-blank character ``{`` or ``[``), rather than prose in brackets."""
    rest = text[start + 1 : start + 200].lstrip()
    return rest[:1] in ("{", "[")


def _closing(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start`` (same kind, outside JSON strings), or
    ``None`` when it never closes."""
    opener = text[start]
    closer = "}" if opener == "{" else "]"
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return index
    return None
