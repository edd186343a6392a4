"""Move a store between databases: export it to a file, import the file into another store.

::

    python -m tools.transfer export --url URL --instance ID --store NAME --out FILE
    python -m tools.transfer import --url URL --instance ID --store NAME --in FILE
    python -m tools.transfer import-chat --url URL --instance ID --store NAME --in FILE \\
        --from chatgpt|claude --actor ID [--no-extract] [--dry-run]

Both work over the public API with the Python client ``kividb_memory`` (the API key from
``KIVIDB_API_KEY``, or ``--api-key``), so they run against a deployed service as well as the
local stack. Both show their progress (``tools.progress``): on a terminal a bar per stage with
its total and percentage (export: the sessions, the memories, current and superseded, then
the actors' profiles; import: the file's check, then its items), elsewhere one line per
stage; then a summary.

What moves: the store's settings (never its provider API keys, which are write-only: the
import says when the source had one, to be given again with ``PUT``); every live session with
all its messages, sequence numbers, summary and extraction state; every live memory, current
and superseded, with every field, its versions and its vector; every actor's profile with each
field's history (the routes of docs/routes.md, "Export and import"). Ids and times stay as
they were.

The file is JSON Lines (gzip when its name ends in ``.gz``): a header (format, version, source,
settings, counts), one line per session, one per memory, one per actor's profile, and an end
line with the counts, so a cut file is refused (a file from before profiles, without their
count, is read as having none). Export writes ``FILE.partial`` and renames it when complete.

A store may be written to while it is exported; the file is still one that imports whole:

- each session is as it was at one moment: the state of its last page, with the messages of
  every page after that state's ``folded_seq`` and up to its ``message_count`` (a session
  deleted and started again meanwhile is read again);
- the memories are the store as it was when the first memory page was read (its
  ``read_at``): a memory created later is left out, one closed later is written as it was
  then, current, and a memory seen twice is kept as last seen. What is still amiss after that
  (a version whose time ran out, or that was forgotten, during the export) is mended so that
  every chain is one the API could have made: a memory closed by a successor not in the file
  is written current, a current one that a memory in the file supersedes is written closed by
  it, a link to a memory not in the file is left out. A chain's memories are written
  together, oldest first.

Before it says it succeeded, export reads its own file back (``check_export``): every session
whole (messages within its cursors, in order, once each; cursors, times and ``pending`` as an
import takes them) and every chain resolved within the file (links named back, one actor, the
times of each link equal, no cycle). Import checks the file the same way before it writes
anything.

Import creates the store when it is missing (a store that exists keeps its provider keys), is
idempotent (importing twice keeps one copy: sessions by id and sequence number, memories by id,
profiles by actor, each field replaced whole)
and resumable: it notes the items done in ``FILE.progress`` (for that target), so a run that
stopped goes on where it stopped; the note is removed at the end. A chain's memories go in one
batch; a chain longer than a batch goes in several, each ending with a memory sent as current
and sent again, closed, at the start of the next, so the target's chains are whole after every
batch.

``import-chat`` brings a ChatGPT or Claude data export's ``conversations.json`` in as sessions
of one actor (``tools.transfer_chat``, ``kividb_memory.chat_export``).

The tool is five modules: this one, the command line; ``tools.transfer_export`` (the export),
``tools.transfer_import`` (the import), ``tools.transfer_file`` (the file's format and its
check, which both use) and ``tools.transfer_chat`` (``import-chat``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kividb_memory import KiviDBError, MemoryClient
from kividb_memory.chat_export import ChatExportError
from tools.progress import Progress
from tools.transfer_chat import import_chat_command
from tools.transfer_export import export_store
from tools.transfer_file import TransferError
from tools.transfer_import import import_store


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
        sub.add_argument(
            "--quiet", action="store_true", help="no progress (bars or lines), only the summary"
        )
    chat = commands.add_parser("import-chat", help="import a ChatGPT or Claude data export")
    chat.add_argument("--url", required=True, help="the API's base URL")
    chat.add_argument("--instance", required=True, help="the instance id")
    chat.add_argument("--store", required=True, help="the store's name")
    chat.add_argument("--in", dest="file", required=True, type=Path, help="conversations.json")
    chat.add_argument("--from", dest="source", required=True, choices=("chatgpt", "claude"))
    chat.add_argument("--actor", required=True, help="the actor the conversations belong to")
    chat.add_argument("--no-extract", action="store_true", help="keep them as working memory only")
    chat.add_argument("--dry-run", action="store_true", help="print what would be made")
    chat.add_argument("--api-key", help="default: $KIVIDB_API_KEY")
    chat.add_argument(
        "--quiet", action="store_true", help="no progress (bars or lines), only the summary"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; 0 when done, 1 when the API or the file refused, 2 without a key."""
    args = parse_args(argv)
    key = args.api_key or os.environ.get("KIVIDB_API_KEY", "").strip()
    if args.command == "import-chat":
        if not key and not args.dry_run:
            print("transfer: no API key: pass --api-key or set KIVIDB_API_KEY", file=sys.stderr)
            return 2
        try:
            return import_chat_command(args, key)
        except (KiviDBError, ChatExportError, OSError, ValueError) as exc:
            print(f"transfer: {exc}", file=sys.stderr)
            return 1
    if not key:
        print("transfer: no API key: pass --api-key or set KIVIDB_API_KEY", file=sys.stderr)
        return 2
    progress = Progress(args.command, quiet=args.quiet)
    try:
        with MemoryClient(args.url, key, timeout=60.0, max_retries=5) as client:
            if args.command == "export":
                counts = export_store(client, args.instance, args.store, args.file, progress)
                progress.summary(
                    f"exported {counts['sessions']} sessions ({counts['messages']} messages) "
                    f"and {counts['memories']} memories and {counts['profiles']} profiles "
                    f"to {args.file}"
                )
            else:
                done = import_store(client, args.instance, args.store, args.file, progress)
                resumed = (
                    f" (resumed after line {done.resumed_after})" if done.resumed_after else ""
                )
                progress.summary(
                    f"imported {done.sessions} sessions ({done.messages_added} new messages) "
                    f"and {done.memories} memories ({done.expired} left out: expired) and "
                    f"{done.profiles} profiles into "
                    f"{args.instance}/{args.store}{resumed}"
                )
                for note in done.notes:
                    progress.summary(f"note: {note}")
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
