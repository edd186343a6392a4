"""The file of ``python -m tools.transfer``: its format (JSON Lines, gzip when its name ends in
``.gz``: a header, one line per session, one per memory, one per actor's profile, an end line
with the counts), reading
it back whole (``_lines``), and its check (``check_export``: every session whole, every chain
resolved within the file), with the chain walk (``_chain``) the export and import order by.

Apart from the export and the import (``tools.transfer_export``, ``tools.transfer_import``)
because both read it: export checks its own file before it says it succeeded, and import
checks the file before it writes anything; it needs no API.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

FORMAT = "kividb-agent-memory-export"
VERSION = 1
LINK_FIELDS = ("supersedes", "superseded_by", "valid_until", "updated_at")
"""The fields of an exported memory that the export's chain repair may change."""
SHOWN_PROBLEMS = 10
"""The problems of a file a refusal names (the first ones)."""


class TransferError(Exception):
    """What stopped a transfer, in one sentence for the terminal."""


def _open(path: Path, mode: str, *, named: Path | None = None) -> IO[str]:
    """``path`` as text, gzip when ``named`` (default ``path``) ends in ``.gz``."""
    if (named or path).name.endswith(".gz"):
        return cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return path.open(mode, encoding="utf-8")


def _lines(
    path: Path, *, named: Path | None = None
) -> tuple[dict[str, Any], list[str], dict[str, int]]:
    """The header, the item lines (raw) and the end counts of an export (gzip when ``named``,
    default ``path``, ends in ``.gz``); ``TransferError`` for a file that is not one, or was
    cut."""
    try:
        with _open(path, "r", named=named) as handle:
            lines = handle.read().splitlines()
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        # a gzip file cut short (EOFError), not gzip at all, or not UTF-8 text
        raise TransferError(
            f"{path} cannot be read whole ({exc}): the export was cut or is not one"
        ) from exc
    if not lines:
        raise TransferError(f"{path} is empty")
    try:
        header = json.loads(lines[0])
        end = json.loads(lines[-1]).get("end")
    except (ValueError, AttributeError) as exc:
        raise TransferError(f"{path} is not an export of {FORMAT}: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TransferError(f"{path} is not an export of {FORMAT}")
    if header.get("version") != VERSION:
        raise TransferError(f"{path} is version {header.get('version')}; this tool reads {VERSION}")
    if not isinstance(end, dict):
        raise TransferError(f"{path} has no end line: the export did not finish")
    return header, lines[1:-1], end


def _link_fields(memory: dict[str, Any]) -> dict[str, Any]:
    """What the chain repair and the check read of an exported memory."""
    return {name: memory.get(name) for name in (*LINK_FIELDS, "valid_from", "actor_id")}


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _chain(memory_id: str, links: dict[str, tuple[str | None, str | None]]) -> list[str]:
    """The ids of ``memory_id``'s chain by ``links`` (``id: (supersedes, superseded_by)``),
    oldest first; a link to an id ``links`` lacks, or back into the chain, ends it."""
    seen = {memory_id}
    head = memory_id
    while (before := links.get(head, (None, None))[0]) in links and before not in seen:
        seen.add(before)
        head = before
    chain = [head]
    while (after := links.get(chain[-1], (None, None))[1]) in links and after not in chain:
        chain.append(after)
    return chain


# --- the check of an export --------------------------------------------------------------------


def check_export(path: Path, *, named: Path | None = None) -> list[str]:
    """What is wrong with the export at ``path`` (gzip when ``named``, default ``path``, ends
    in ``.gz``; nothing: an empty list): what ``check_items`` finds in its items, or that it
    is not an export, or was cut."""
    try:
        _, items, end = _lines(path, named=named)
    except TransferError as exc:
        return [str(exc)]
    problems = check_items(items)
    if len(items) != items_counted(end):
        problems.append(f"it holds {len(items)} items, its end line says otherwise")
    return problems


def items_counted(end: dict[str, Any]) -> int:
    """How many items an end line counts (-1 for one without its counts): sessions, memories
    and profiles (an export from before profiles has no count of them: 0)."""
    counts = [end.get("sessions"), end.get("memories"), end.get("profiles", 0)]
    if not all(isinstance(count, int) for count in counts):
        return -1
    return sum(cast(list[int], counts))


def check_items(items: Sequence[str]) -> list[str]:
    """What is wrong with an export's items (lines): a session that is not whole
    (``session_problems``), an item given twice, a chain not resolved within the export
    (``chain_problems``), a profile without its actor or fields."""
    problems: list[str] = []
    sessions: set[str] = set()
    actors: set[str] = set()
    links: dict[str, dict[str, Any]] = {}
    memories: set[str] = set()
    for line in items:
        item = json.loads(line)
        if "session" in item:
            session = item["session"]
            if session["session_id"] in sessions:
                problems.append(f"session {session['session_id']} is in the export twice")
            sessions.add(session["session_id"])
            problems += [f"session {session['session_id']}: {p}" for p in session_problems(session)]
        elif "memory" in item:
            memory = item["memory"]
            if memory["id"] in memories:
                problems.append(f"memory {memory['id']} is in the export twice")
            memories.add(memory["id"])
            if memory.get("supersedes") or memory.get("superseded_by"):
                links[memory["id"]] = _link_fields(memory)
        elif "profile" in item:
            profile = item["profile"]
            actor = profile.get("actor_id") if isinstance(profile, dict) else None
            if not isinstance(actor, str) or not isinstance(profile.get("fields"), dict):
                problems.append(f"a profile has no actor_id or no fields: {line[:80]}")
            elif actor in actors:
                problems.append(f"the profile of actor {actor} is in the export twice")
            else:
                actors.add(actor)
        else:
            problems.append(f"an item is not a session, a memory or a profile: {line[:80]}")
    return problems + chain_problems(links)


def session_problems(session: dict[str, Any]) -> list[str]:
    """What keeps an exported session from being one moment's, whole (as ``PUT
    .../import/sessions`` checks it, with every message): messages in order, once each, after
    ``folded_seq`` and up to ``message_count`` (one missing in between is missing in the source
    too: a session imported without it); ``folded_seq <= read_seq <=
    message_count``; ``pending`` of the messages after ``read_seq``, up to ``message_count``;
    ``created_at <= last_event_at < expires_at``."""
    low, count, read = session["folded_seq"], session["message_count"], session["read_seq"]
    problems = []
    seqs = [m["seq"] for m in session.get("messages") or []]
    if seqs != sorted(set(seqs)):
        problems.append("its messages are not in order, once each")
    elif seqs and not low < seqs[0] <= seqs[-1] <= count:
        problems.append(
            f"its messages run from {seqs[0]} to {seqs[-1]}, outside folded_seq + 1 "
            f"to message_count ({low + 1} to {count})"
        )
    if not low <= read <= count:
        problems.append(
            f"its cursors are out of order: folded_seq {low}, read_seq {read}, "
            f"message_count {count}"
        )
    pending = session.get("pending")
    if pending is not None:
        try:
            answer = json.loads(pending)
            first, last = answer["from"], answer["to"]
        except (ValueError, TypeError, KeyError):
            problems.append("its pending is not an extraction answer")
        else:
            if first != read + 1 or not first <= last <= count:
                problems.append(
                    f"its pending is of messages {first} to {last}, not from "
                    f"read_seq + 1 ({read + 1}) to at most {count}"
                )
    if (
        not _moment(session["created_at"])
        <= _moment(session["last_event_at"])
        < _moment(session["expires_at"])
    ):
        problems.append("its times are out of order (created_at, last_event_at, expires_at)")
    return problems


def chain_problems(links: dict[str, dict[str, Any]]) -> list[str]:
    """What keeps the chains of ``links`` (id: ``_link_fields``) from being whole within the
    export: a link to a memory it lacks, not named back, to another actor's memory, a
    ``valid_until`` other than the successor's ``valid_from``, a cycle."""
    problems = []
    for memory_id, fields in links.items():
        after_id = fields["superseded_by"]
        after = links.get(after_id or "")
        if after_id and after is None:
            problems.append(
                f"memory {memory_id} was replaced by {after_id}, which the export lacks"
            )
        elif after is not None and (
            after["supersedes"] != memory_id
            or after["actor_id"] != fields["actor_id"]
            or fields["valid_until"] is None
            or _moment(after["valid_from"]) != _moment(fields["valid_until"])
        ):
            problems.append(f"memory {memory_id} and {after_id}, which replaced it, disagree")
        before_id = fields["supersedes"]
        before = links.get(before_id or "")
        if before_id and (before is None or before["superseded_by"] != memory_id):
            problems.append(
                f"memory {memory_id} replaced {before_id}, which the export lacks "
                "or shows replaced by another"
            )
    pairs = {i: (f["supersedes"], f["superseded_by"]) for i, f in links.items()}
    seen: set[str] = set()
    for memory_id in links:
        if memory_id in seen:
            continue
        chain = _chain(memory_id, pairs)
        seen.update(chain)
        if pairs[chain[-1]][1] in chain:
            problems.append(f"memory {memory_id} is in a cycle of supersedes")
    return problems


def _shown(problems: list[str]) -> str:
    more = len(problems) - SHOWN_PROBLEMS
    return "; ".join(problems[:SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
