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
idempotent (importing twice keeps one copy: sessions by id and sequence number, memories by id)
and resumable: it notes the items done in ``FILE.progress`` (for that target), so a run that
stopped goes on where it stopped; the note is removed at the end. A chain's memories go in one
batch; a chain longer than a batch goes in several, each ending with a memory sent as current
and sent again, closed, at the start of the next, so the target's chains are whole after every
batch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
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
SESSION_ATTEMPTS = 5
"""How many times a session is read again when it was deleted and started again while its
pages were read."""
SECRET_SETTINGS = ("llm_api_key", "embed_api_key")
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
        _export_sessions(store, handle, written, bar)
        _export_memories(store, handle, written, bar)
        handle.write(json.dumps({"end": written}) + "\n")
    problems = check_export(partial, named=out)
    if problems:
        raise TransferError(
            f"the export is not whole, so it was left as {partial}: " + _shown(problems)
        )
    partial.replace(out)
    return written


def _export_sessions(
    store: StoreClient, handle: IO[str], written: dict[str, int], bar: tqdm[Any]
) -> None:
    """Write every live session of ``store``, each whole (``_whole_session``), once."""
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
            return


def _export_memories(
    store: StoreClient, handle: IO[str], written: dict[str, int], bar: tqdm[Any]
) -> None:
    """Write every memory of ``store`` as it was when the first page was read, each chain
    whole, together and oldest first (``_MemorySpool``)."""
    with _MemorySpool() as spool:
        cursor: str | None = None
        while True:
            memories = store.export_memories(cursor=cursor, limit=MEMORY_PAGE)
            if cursor is None and memories.read_at is not None:
                spool.moment = memories.read_at
            for memory in memories.memories:
                if spool.add(memory.model_dump(mode="json")):
                    bar.update(1)
            cursor = memories.next_cursor
            if cursor is None:
                break
        for line in spool.lines():
            handle.write(line + "\n")
            written["memories"] += 1


def _whole_session(store: StoreClient, session_id: str) -> dict[str, Any] | None:
    """A session with every message, as it was at one moment (``_one_moment``); None when it
    is gone. ``TransferError`` when it was started again under its id every time it was read
    (``SESSION_ATTEMPTS``)."""
    for _ in range(SESSION_ATTEMPTS):
        pages = _session_pages(store, session_id)
        if pages is None:
            return None
        session = _one_moment(pages)
        if session is not None:
            return session
    raise TransferError(f"session {session_id} was deleted and started again each time it "
                        "was read; export again when it is quiet")  # fmt: skip


def _session_pages(store: StoreClient, session_id: str) -> list[dict[str, Any]] | None:
    """Every page of a session's export (JSON), first to last; None when it is gone. Stops
    early when a page is of another life of the session (another ``created_at``)."""
    pages: list[dict[str, Any]] = []
    after = 0
    while True:
        try:
            page = store.export_session(session_id, after_seq=after, limit=SESSION_PAGE)
        except NotFoundError:
            return None
        pages.append(page.model_dump(mode="json"))
        if page.next_after_seq is None or pages[-1]["created_at"] != pages[0]["created_at"]:
            return pages
        after = page.next_after_seq


def _one_moment(pages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session as its last page saw it: that page's state (its counts, cursors, summary,
    ``pending``), with the messages of every page after its ``folded_seq`` and up to its
    ``message_count``. A message never changes once kept, and those a page misses were
    folded by then, so this is the session at the last page's moment (the first page's
    ``message_count`` may be smaller: messages added since are on later pages). None when the
    pages are of two lives of the session."""
    last = pages[-1]
    if any(page["created_at"] != last["created_at"] for page in pages):
        return None
    low, high = last["folded_seq"], last["message_count"]
    kept = {m["seq"]: m for page in pages for m in page["messages"] if low < m["seq"] <= high}
    session = {name: value for name, value in last.items() if name != "next_after_seq"}
    session["messages"] = [kept[seq] for seq in sorted(kept)]
    return session


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
    its settings set to the export's). ``TransferError`` for a bad file (nothing is written
    then), ``KiviDBError`` from the API."""
    header, items, end = _lines(source)
    if len(items) != end.get("sessions", -1) + end.get("memories", -2):
        raise TransferError(f"{source} holds {len(items)} items, its end line says otherwise")
    problems = check_items(items)
    if problems:
        raise TransferError(f"{source} is not whole, so nothing was imported: " + _shown(problems))
    done = Imported()
    for key, had in (header.get("had_keys") or {}).items():
        if had:
            done.notes.append(f"the source store had a {key}; give it again with PUT (it is "
                              "never exported)")  # fmt: skip
    client.put_store(instance, name, **header["settings"])
    store = client.store(instance, name)
    progress = Progress(source, f"{client.base_url} {instance} {name}")
    done.resumed_after = progress.done
    sender = _MemorySender(store, progress, done)
    kinds = [_kind(line) for line in items]
    with tqdm(total=len(items), initial=progress.done, unit="item", desc="import",
              disable=quiet) as bar:  # fmt: skip
        for unit in _units(_import_order(kinds), kinds, progress.done):
            number, at = unit[0]
            if kinds[at][0] is None:
                sender.flush()
                done.messages_added += _import_session(store, json.loads(items[at])["session"])
                done.sessions += 1
                progress.save(number)
            else:
                sender.add([(number, items[at]) for number, at in unit])
            bar.update(len(unit))
        sender.flush()
    progress.finish()
    return done


Kind = tuple[str | None, str | None, str | None]
"""What the import's order needs of an item: a memory's id, ``supersedes`` and
``superseded_by`` (all None for a session)."""


def _kind(line: str) -> Kind:
    memory = json.loads(line).get("memory")
    if memory is None:
        return None, None, None
    return memory["id"], memory.get("supersedes"), memory.get("superseded_by")


def _import_order(kinds: list[Kind]) -> list[int]:
    """The places of the items in the order they are imported: the file's, except that the
    memories of a chain come together, oldest first, where its first one is (an export of
    this tool writes them so already)."""
    links = {i: (before, after) for i, before, after in kinds if i and (before or after)}
    place = {memory_id: at for at, (memory_id, _, _) in enumerate(kinds) if memory_id}
    order: list[int] = []
    placed: set[str] = set()
    for at, (memory_id, _, _) in enumerate(kinds):
        if memory_id is None or memory_id not in links:
            order.append(at)
        elif memory_id not in placed:
            chain = _chain(memory_id, links)
            placed.update(chain)
            order += [place[i] for i in chain]
    return order


def _units(order: list[int], kinds: list[Kind], done: int) -> Iterator[list[tuple[int, int]]]:
    """The items after the first ``done`` of ``order``, each as ``(number, place)`` (its
    number in the import's order, from 1), a session alone and a chain of memories together
    (a memory that names the one before it in ``supersedes`` goes on its chain)."""
    unit: list[tuple[int, int]] = []
    previous: str | None = None
    for number, at in enumerate(order, start=1):
        if number <= done:
            continue
        memory_id, before, _ = kinds[at]
        if unit and (memory_id is None or previous is None or before != previous):
            yield unit
            unit = []
        unit.append((number, at))
        previous = memory_id
    if unit:
        yield unit


class _MemorySender:
    """Memory import batches of at most ``MEMORY_BATCH`` memories and ``MEMORY_BATCH_BYTES``,
    a chain never split across two unless it is longer than one: then it goes in segments, each
    but the last ending with a memory sent as current and sent again, as it is, at the start of
    the next, so that every chain in the target is whole after each batch. The progress is saved
    after each batch (the item before a memory sent as current, which is sent again)."""

    def __init__(self, store: StoreClient, progress: Progress, done: Imported) -> None:
        self._store = store
        self._progress = progress
        self._done = done
        self._batch: list[dict[str, Any]] = []
        self._bytes = 0
        self._end = 0

    def add(self, chain: list[tuple[int, str]]) -> None:
        """Send the memories of one chain (``(number, line)``, oldest first)."""
        sizes = [len(line.encode("utf-8")) for _, line in chain]
        if self._batch and (
            len(self._batch) + len(chain) > MEMORY_BATCH
            or self._bytes + sum(sizes) > MEMORY_BATCH_BYTES
        ):
            self.flush()
        start = 0
        while len(chain) - start > 1 and (
            len(chain) - start > MEMORY_BATCH or sum(sizes[start:]) > MEMORY_BATCH_BYTES
        ):
            end, size = start, 0
            while end - start < MEMORY_BATCH and size + sizes[end] <= MEMORY_BATCH_BYTES:
                size += sizes[end]
                end += 1
            end = max(end, start + 2)  # at least one memory more than the one sent again
            memories = [json.loads(line)["memory"] for _, line in chain[start:end]]
            memories[-1] = {**memories[-1], "superseded_by": None, "valid_until": None}
            self._send(memories, chain[end - 1][0] - 1, again=memories[-1]["id"])
            start = end - 1
        for (number, line), size in zip(chain[start:], sizes[start:], strict=True):
            self._batch.append(json.loads(line)["memory"])
            self._bytes += size
            self._end = number

    def flush(self) -> None:
        """Send the batch gathered so far."""
        if self._batch:
            self._send(self._batch, self._end)
            self._batch, self._bytes = [], 0

    def _send(
        self, memories: list[dict[str, Any]], done_through: int, again: str | None = None
    ) -> None:
        """Import ``memories`` and note the items done through ``done_through``; ``again``
        is the id sent again with the next batch (counted then)."""
        result = self._store.import_memories(memories)
        self._done.memories += result.imported - (again is not None and again not in result.expired)
        self._done.expired += len([i for i in result.expired if i != again])
        self._progress.save(done_through)


def _import_session(store: StoreClient, session: dict[str, Any]) -> int:
    """Send one exported session in pages of at most ``IMPORT_PAGE`` messages and
    ``MEMORY_BATCH_BYTES`` of JSON (the API takes bodies up to 1 MiB), each with the session's
    state; returns how many messages the target did not have yet."""
    messages = session.get("messages") or []
    state = {k: v for k, v in session.items() if k not in ("messages", "session_id")}
    room = MEMORY_BATCH_BYTES - len(json.dumps(state, ensure_ascii=False).encode("utf-8"))
    pages: list[list[dict[str, Any]]] = [[]]
    size = 0
    for message in messages:
        weight = len(json.dumps(message, ensure_ascii=False).encode("utf-8")) + 1
        if pages[-1] and (len(pages[-1]) >= IMPORT_PAGE or size + weight > room):
            pages.append([])
            size = 0
        pages[-1].append(message)
        size += weight
    added = 0
    for page in pages:
        body = {**state, "messages": page}
        added += store.import_session(session["session_id"], body).messages_added
    return added


class _MemorySpool:
    """The memories of an export as they are read, kept in a temporary file (the last time
    each was seen, ``add``), with their links in memory; ``lines`` repairs the chains to one
    moment each and gives the memories, a chain's together and oldest first.

    ``moment`` (the first page's ``read_at``: every memory kept then and until the end of the
    export is read) makes the export the store as it was then: a memory created later is left
    out, and one closed later is kept as it was then, current. What is still missing after
    that (a memory whose time ran out, or that was forgotten, during the export) ``_repair``
    mends."""

    def __init__(self) -> None:
        self.moment: datetime | None = None
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self._at: dict[str, tuple[int, int]] = {}
        self._links: dict[str, dict[str, Any]] = {}
        self._changed: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> _MemorySpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def add(self, memory: dict[str, Any]) -> bool:
        """Keep ``memory`` (JSON of an ``ExportedMemory``) as it was at ``moment``, in place of
        an earlier reading of it; True when it was not seen before (False too when it was
        created after ``moment``: it is left out)."""
        if self.moment is not None:
            if _moment(memory["created_at"]) > self.moment:
                return False
            until = memory.get("valid_until")
            if until is not None and _moment(until) > self.moment:
                memory = {**memory, "valid_until": None, "superseded_by": None}
        data = json.dumps(memory, ensure_ascii=False).encode("utf-8")
        self._file.seek(0, os.SEEK_END)
        new = memory["id"] not in self._at
        self._at[memory["id"]] = (self._file.tell(), len(data))
        self._file.write(data)
        if memory.get("supersedes") or memory.get("superseded_by"):
            self._links[memory["id"]] = _link_fields(memory)
        else:
            self._links.pop(memory["id"], None)
        return new

    def lines(self) -> Iterator[str]:
        """Every memory once (JSON), chains repaired (``_repair``), each chain together, oldest
        first, where its first memory read is."""
        self._repair()
        links = {i: (f["supersedes"], f["superseded_by"]) for i, f in self._links.items()}
        written: set[str] = set()
        for memory_id in self._at:
            if memory_id in written:
                continue
            chain = _chain(memory_id, links) if memory_id in links else [memory_id]
            for one in chain:
                written.add(one)
                yield json.dumps({"memory": self._memory(one)}, ensure_ascii=False)

    def _memory(self, memory_id: str) -> dict[str, Any]:
        offset, length = self._at[memory_id]
        self._file.seek(offset)
        memory: dict[str, Any] = json.loads(self._file.read(length))
        memory.update(self._changed.get(memory_id, {}))
        return memory

    def _change(self, memory_id: str, **fields: Any) -> None:
        if memory_id not in self._links:
            self._links[memory_id] = _link_fields(self._memory(memory_id))
        self._links[memory_id].update(fields)
        self._changed.setdefault(memory_id, {}).update(fields)

    def _repair(self) -> None:
        """Make every chain one moment's: a memory closed by one that is not in the export or
        does not name it back is made current again (as before the supersede); then, oldest
        successor first, a memory that names a predecessor in the export still current closes
        it (as the supersede did: its ``valid_until`` and ``updated_at`` the successor's
        ``valid_from``), and one whose predecessor is missing, or closed by another, or another
        actor's, names none."""
        for memory_id, fields in list(self._links.items()):
            after = self._links.get(fields["superseded_by"] or "")
            if fields["superseded_by"] and (after is None or after["supersedes"] != memory_id):
                self._change(memory_id, superseded_by=None, valid_until=None)
        successors = [(_moment(f["valid_from"]), i) for i, f in self._links.items()
                      if f["supersedes"]]  # fmt: skip
        for _, memory_id in sorted(successors):
            fields = self._links[memory_id]
            before_id = fields["supersedes"]
            before = self._links.get(before_id) if before_id in self._at else None
            if before_id in self._at and before is None:
                before = _link_fields(self._memory(before_id))
            if (
                before is None
                or before["actor_id"] != fields["actor_id"]
                or (before["superseded_by"] not in (None, memory_id))
            ):
                self._change(memory_id, supersedes=None)
            elif before["superseded_by"] is None:
                moment = fields["valid_from"]
                updated = max(before["updated_at"], moment, key=_moment)
                self._change(before_id, superseded_by=memory_id, valid_until=moment,
                             updated_at=updated)  # fmt: skip


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
    if len(items) != end.get("sessions", -1) + end.get("memories", -2):
        problems.append(f"it holds {len(items)} items, its end line says otherwise")
    return problems


def check_items(items: Sequence[str]) -> list[str]:
    """What is wrong with an export's items (lines): a session that is not whole
    (``session_problems``), an item given twice, a chain not resolved within the export
    (``chain_problems``)."""
    problems: list[str] = []
    sessions: set[str] = set()
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
        else:
            problems.append(f"an item is neither a session nor a memory: {line[:80]}")
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
        problems.append(f"its messages run from {seqs[0]} to {seqs[-1]}, outside folded_seq + 1 "
                        f"to message_count ({low + 1} to {count})")  # fmt: skip
    if not low <= read <= count:
        problems.append(f"its cursors are out of order: folded_seq {low}, read_seq {read}, "
                        f"message_count {count}")  # fmt: skip
    pending = session.get("pending")
    if pending is not None:
        try:
            answer = json.loads(pending)
            first, last = answer["from"], answer["to"]
        except (ValueError, TypeError, KeyError):
            problems.append("its pending is not an extraction answer")
        else:
            if first != read + 1 or not first <= last <= count:
                problems.append(f"its pending is of messages {first} to {last}, not from "
                                f"read_seq + 1 ({read + 1}) to at most {count}")  # fmt: skip
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
            problems.append(f"memory {memory_id} was replaced by {after_id}, which the export "
                            "lacks")  # fmt: skip
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
            problems.append(f"memory {memory_id} replaced {before_id}, which the export lacks "
                            "or shows replaced by another")  # fmt: skip
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
