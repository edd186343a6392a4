"""``python -m tools.transfer import-chat``: a ChatGPT or Claude data export's
``conversations.json`` into a store, as sessions of one actor with their original times
(``kividb_memory.chat_export`` reads the formats and says what maps; docs/deploy.md, "Importing
ChatGPT and Claude conversations").

::

    python -m tools.transfer import-chat --url URL --instance ID --store NAME \\
        --in conversations.json --from chatgpt|claude --actor ID [--no-extract] [--dry-run]

Every conversation is checked before anything is written: a malformed one is named (its place
in the file, id and title) with what is wrong, and nothing is imported. ``--dry-run`` prints
the sessions it would make and writes nothing (it needs no API). Progress as every
long-running command shows it (``tools.progress``): on a terminal a bar with the count of
conversations imported, its total and a percentage; piped, one line when the stage ends; the
summary on stdout.
"""

from __future__ import annotations

import sys
from argparse import Namespace
from typing import TextIO

from kividb_memory import MemoryClient
from kividb_memory.chat_export import ChatConversation, import_chat, read_chat_export
from tools.progress import Progress


def _stage(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def describe(conversation: ChatConversation) -> str:
    """One line of the dry run: session id, messages, time span and title."""
    if not conversation.messages:
        return (
            f"  {conversation.session_id}: no message with text, left out ({conversation.title!r})"
        )
    first = conversation.messages[0].created_at.isoformat(timespec="seconds")
    last = conversation.last_event_at.isoformat(timespec="seconds")
    return (
        f"  {conversation.session_id}: {len(conversation.messages)} messages, {first} to {last}"
        f" ({conversation.title!r})"
    )


def import_chat_command(args: Namespace, key: str, out: TextIO = sys.stdout) -> int:
    """The subcommand; 0 when done. Raises ``ChatExportError`` for a malformed export and the
    client's errors (``tools.transfer.main`` prints them)."""
    conversations = read_chat_export(args.file, args.source)
    messages = sum(len(c.messages) for c in conversations)
    _stage(out, f"read {len(conversations)} conversations ({messages} messages) from {args.file}")
    mode = "kept as working memory only" if args.no_extract else "extraction armed"
    if args.dry_run:
        _stage(
            out,
            f"dry run: would import into {args.instance}/{args.store} "
            f"as actor {args.actor} ({mode}):",
        )
        for conversation in conversations:
            _stage(out, describe(conversation))
        kept = [c for c in conversations if c.messages]
        _stage(out, f"would make {len(kept)} sessions ({messages} messages); nothing was written")
        return 0
    progress = Progress("import-chat", quiet=args.quiet)
    with MemoryClient(args.url, key, timeout=60.0, max_retries=5) as client:
        store = client.store(args.instance, args.store)
        progress.say(f"importing {len(conversations)} conversations as actor {args.actor} ({mode})")
        with progress.stage("conversations", len(conversations), unit="conv") as stage:
            done = import_chat(
                store,
                conversations,
                args.actor,
                extract=not args.no_extract,
                progress=lambda _c: stage.advance(),
            )
    _stage(
        out,
        f"imported {done.sessions} sessions ({done.messages} messages, {done.messages_added} new) "
        f"into {args.instance}/{args.store} as actor {args.actor} ({mode}); "
        f"{len(done.empty)} conversations without text left out",
    )
    return 0
