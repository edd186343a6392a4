"""Move a store between databases: export it to a file, import the file into another store.

::

    python -m tools.transfer export --url URL --instance ID --store NAME --out FILE
    python -m tools.transfer import --url URL --instance ID --store NAME --in FILE

Both work over the public API with the Python client ``kividb_memory`` (the API key from
``KIVIDB_API_KEY``, or ``--api-key``), so they run against a deployed service as well as the
local stack, and both show a progress bar.

What moves: the store's settings (never its provider API keys, which are write-only: the
import says when the source had one, to be given again with ``PUT``); every live session with
all its messages, sequence numbers, summary and extraction state; every live memory, current
and superseded, with every field, its versions and its vector (the routes of docs/routes.md,
"Export and import"). Ids and times stay as they were.

The file is JSON Lines (gzip when its name ends in ``.gz``): a header (format, version, source,
settings, counts), one line per session, one per memory, and an end line with the counts, so a
cut file is refused. Export writes ``FILE.partial`` and renames it when complete.

Import creates the store when it is missing (a store that exists keeps its provider keys), is
idempotent (importing twice keeps one copy: sessions by id and sequence number, memories by id)
and resumable: it notes the lines done in ``FILE.progress`` (for that target), so a run that
stopped goes on where it stopped; the note is removed at the end. The source should not be
written to while it is exported (a session appended to during its export may be exported
between two states); see docs/routes.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from tqdm import tqdm

from kividb_memory import KiviDBError, MemoryClient, NotFoundError, StoreClient, StorePut

FORMAT = "kividb-agent-memory-export"
VERSION = 1
SESSION_PAGE = 1000
"""Messages per session export call (the route's limit)."""
IMPORT_PAGE = 200
"""Messages per session import call (the route's limit)."""
MEMORY_BATCH = 100
"""Memories per import call (the route's limit)."""
MEMORY_BATCH_BYTES = 700_000
"""A batch is also cut before its JSON passes this size (the API takes bodies up to 1 MiB)."""
ID_PAGE = 1000
MEMORY_PAGE = 100
SECRET_SETTINGS = ("llm_api_key", "embed_api_key")


class TransferError(Exception):
    """What stopped a transfer, in one sentence for the terminal."""


def _open(path: Path, mode: str, *, named: Path | None = None) -> IO[str]:
    """``path`` as text, gzip when ``named`` (default ``path``) ends in ``.gz``."""
    if (named or path).name.endswith(".gz"):
        return cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return path.open(mode, encoding="utf-8")


def _settings(store: dict[str, Any]) -> dict[str, Any]:
    """The writable settings of a ``StoreView`` (``StorePut``'s fields but the API keys)."""
    writable = set(StorePut.model_fields) - set(SECRET_SETTINGS)
    return {name: value for name, value in store.items() if name in writable}


def export_store(
    client: MemoryClient, instance: str, name: str, out: Path, *, quiet: bool = False
) -> dict[str, int]:
    """Write store ``name`` of ``instance`` to ``out``; returns the counts written
    (``sessions``, ``messages``, ``memories``). ``KiviDBError`` from the API."""
    view = client.get_store(instance, name)
    store = client.store(instance, name)
    counts = view.counts
    header = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "source": {"url": client.base_url, "instance": instance, "store": name},
        "settings": _settings(view.model_dump(mode="json")),
        "had_keys": {"llm_api_key": view.has_llm_api_key, "embed_api_key": view.has_embed_api_key},
        "counts": {
            "sessions": counts.sessions if counts else None,
            "memories": counts.memories if counts else None,
        },
    }
    partial = out.with_name(out.name + ".partial")
    written = {"sessions": 0, "messages": 0, "memories": 0}
    # The counts are of current memories; the export also writes the superseded ones, so the
    # bar's total is the sessions and current memories, and it may go past it.
    total = (counts.sessions + counts.memories) if counts else None
    with (
        _open(partial, "w", named=out) as handle,
        tqdm(total=total, unit="item", desc="export", disable=quiet) as bar,
    ):
        handle.write(json.dumps(header, ensure_ascii=False) + "\n")
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = store.export_session_ids(cursor=cursor, limit=ID_PAGE)
            for session_id in page.session_ids:
                if session_id in seen:
                    continue
                seen.add(session_id)
                session = _whole_session(store, session_id)
                if session is None:
                    continue  # it expired or was deleted meanwhile
                handle.write(json.dumps({"session": session}, ensure_ascii=False) + "\n")
                written["sessions"] += 1
                written["messages"] += len(session["messages"])
                bar.update(1)
            cursor = page.next_cursor
            if cursor is None:
                break
        kept: set[str] = set()
        cursor = None
        while True:
            memories = store.export_memories(cursor=cursor, limit=MEMORY_PAGE)
            for memory in memories.memories:
                if memory.id in kept:
                    continue
                kept.add(memory.id)
                line = {"memory": memory.model_dump(mode="json")}
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                written["memories"] += 1
                bar.update(1)
            cursor = memories.next_cursor
            if cursor is None:
                break
        handle.write(json.dumps({"end": written}) + "\n")
    partial.replace(out)
    return written


def _whole_session(store: StoreClient, session_id: str) -> dict[str, Any] | None:
    """A session's state with every message, reading its pages; None when it is gone."""
    after = 0
    session: dict[str, Any] | None = None
    while True:
        try:
            page = store.export_session(session_id, after_seq=after, limit=SESSION_PAGE)
        except NotFoundError:
            return None
        data = page.model_dump(mode="json")
        if session is None:
            session = data
        else:
            session["messages"] += data["messages"]
        if page.next_after_seq is None:
            session.pop("next_after_seq", None)
            return session
        after = page.next_after_seq


def _lines(path: Path) -> tuple[dict[str, Any], list[str], dict[str, int]]:
    """The header, the item lines (raw) and the end counts of an export; ``TransferError``
    for a file that is not one, or was cut."""
    try:
        with _open(path, "r") as handle:
            lines = handle.read().splitlines()
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        # a gzip file cut short (EOFError), not gzip at all, or not UTF-8 text
        raise TransferError(f"{path} cannot be read whole ({exc}): the export was cut or is "
                            "not one") from exc  # fmt: skip
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


class Progress:
    """The lines of an export already imported into one target, kept in ``<file>.progress``
    (JSON ``{"target", "lines_done"}``, written whole each time by a rename)."""

    def __init__(self, source: Path, target: str) -> None:
        self.path = source.with_name(source.name + ".progress")
        self.target = target
        self.done = 0
        if self.path.exists():
            try:
                kept = json.loads(self.path.read_text())
            except ValueError:
                kept = {}
            if kept.get("target") == target:
                self.done = int(kept.get("lines_done", 0))

    def save(self, done: int) -> None:
        self.done = done
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(json.dumps({"target": self.target, "lines_done": done}))
        partial.replace(self.path)

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class Imported:
    """What an import did: sessions and their messages written (``messages_added``: those the
    target did not have), memories written and those left out because their time was up, and
    the line it resumed after (0: from the start)."""

    sessions: int = 0
    messages_added: int = 0
    memories: int = 0
    expired: int = 0
    resumed_after: int = 0
    notes: list[str] = field(default_factory=list)


def import_store(
    client: MemoryClient, instance: str, name: str, source: Path, *, quiet: bool = False
) -> Imported:
    """Import the export ``source`` into store ``name`` of ``instance`` (created when missing;
    its settings set to the export's). ``TransferError`` for a bad file, ``KiviDBError`` from
    the API."""
    header, items, end = _lines(source)
    if len(items) != end.get("sessions", -1) + end.get("memories", -2):
        raise TransferError(f"{source} holds {len(items)} items, its end line says otherwise")
    done = Imported()
    for key, had in (header.get("had_keys") or {}).items():
        if had:
            done.notes.append(f"the source store had a {key}; give it again with PUT (it is "
                              "never exported)")  # fmt: skip
    client.put_store(instance, name, **header["settings"])
    store = client.store(instance, name)
    progress = Progress(source, f"{client.base_url} {instance} {name}")
    done.resumed_after = progress.done
    batch: list[dict[str, Any]] = []
    batch_bytes = 0
    batch_end = 0

    def flush() -> None:
        nonlocal batch, batch_bytes
        if batch:
            result = store.import_memories(batch)
            done.memories += result.imported
            done.expired += len(result.expired)
            progress.save(batch_end)
            batch, batch_bytes = [], 0

    with tqdm(total=len(items), initial=progress.done, unit="item", desc="import",
              disable=quiet) as bar:  # fmt: skip
        for number, line in enumerate(items, start=1):
            if number <= progress.done:
                continue
            item = json.loads(line)
            if "session" in item:
                flush()
                done.messages_added += _import_session(store, item["session"])
                done.sessions += 1
                progress.save(number)
            else:
                memory = item["memory"]
                size = len(line.encode("utf-8"))
                if batch and (
                    len(batch) >= MEMORY_BATCH or batch_bytes + size > MEMORY_BATCH_BYTES
                ):
                    flush()
                batch.append(memory)
                batch_bytes += size
                batch_end = number
            bar.update(1)
        flush()
    progress.finish()
    return done


def _import_session(store: StoreClient, session: dict[str, Any]) -> int:
    """Send one exported session in pages of ``IMPORT_PAGE`` messages; returns how many
    messages the target did not have yet."""
    messages = session.get("messages") or []
    state = {k: v for k, v in session.items() if k not in ("messages", "session_id")}
    added = 0
    for start in range(0, max(len(messages), 1), IMPORT_PAGE):
        page = {**state, "messages": messages[start : start + IMPORT_PAGE]}
        added += store.import_session(session["session_id"], page).messages_added
    return added


# --- the command -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.transfer",
        description="Export a store to a file, or import a file into a store, over the API.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for command, flag, help_text in (
        ("export", "--out", "the file to write (JSON Lines; gzip when it ends in .gz)"),
        ("import", "--in", "an export written by this tool"),
    ):
        sub = commands.add_parser(command, help=f"{command} a store")
        sub.add_argument("--url", required=True, help="the API's base URL")
        sub.add_argument("--instance", required=True, help="the instance id")
        sub.add_argument("--store", required=True, help="the store's name")
        sub.add_argument(flag, dest="file", required=True, type=Path, help=help_text)
        sub.add_argument("--api-key", help="default: $KIVIDB_API_KEY")
        sub.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; 0 when done, 1 when the API or the file refused, 2 without a key."""
    args = parse_args(argv)
    key = args.api_key or os.environ.get("KIVIDB_API_KEY", "").strip()
    if not key:
        print("transfer: no API key: pass --api-key or set KIVIDB_API_KEY", file=sys.stderr)
        return 2
    try:
        with MemoryClient(args.url, key, timeout=60.0, max_retries=5) as client:
            if args.command == "export":
                counts = export_store(client, args.instance, args.store, args.file,
                                      quiet=args.quiet)  # fmt: skip
                print(f"exported {counts['sessions']} sessions ({counts['messages']} messages) "
                      f"and {counts['memories']} memories to {args.file}")  # fmt: skip
            else:
                done = import_store(client, args.instance, args.store, args.file,
                                    quiet=args.quiet)  # fmt: skip
                resumed = (
                    f" (resumed after line {done.resumed_after})" if done.resumed_after else ""
                )
                print(f"imported {done.sessions} sessions ({done.messages_added} new messages) "
                      f"and {done.memories} memories ({done.expired} left out: expired) into "
                      f"{args.instance}/{args.store}{resumed}")  # fmt: skip
                for note in done.notes:
                    print(f"note: {note}")
    except (KiviDBError, TransferError, OSError) as exc:
        print(f"transfer: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        again = (
            "run the same command again to go on where it stopped"
            if args.command == "import"
            else f"nothing was written to {args.file}; run it again"
        )
        print(f"\ntransfer: interrupted: {again}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
