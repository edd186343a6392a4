"""The export of ``python -m tools.transfer``: ``export_store`` reads a store over the API
and writes it to a file, each session as it was at one moment (``_whole_session``) and the
memories as the store was at the first memory page's ``read_at``, every chain mended to one
the API could have made and written together, oldest first (``_MemorySpool``).

Apart from the import (``tools.transfer_import``) because the two share only the file
(``tools.transfer_file``): the export pages the store's export routes and holds the memories
in a spool until every page is read, while the import sends the file in batches and notes its
progress.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from kividb_memory import MemoryClient, NotFoundError, StoreClient, StorePut
from tools.progress import Progress, Stage
from tools.transfer_file import (
    FORMAT,
    VERSION,
    TransferError,
    _chain,
    _link_fields,
    _moment,
    _open,
    _shown,
    check_export,
)

SESSION_PAGE = 1000
"""Messages per session export call (the route's limit)."""
ID_PAGE = 1000
MEMORY_PAGE = 100
SESSION_ATTEMPTS = 5
"""How many times a session is read again when it was deleted and started again while its
pages were read."""
SECRET_SETTINGS = ("llm_api_key", "embed_api_key")


def _settings(store: dict[str, Any]) -> dict[str, Any]:
    """The writable settings of a ``StoreView`` (``StorePut``'s fields but the API keys)."""
    writable = set(StorePut.model_fields) - set(SECRET_SETTINGS)
    return {name: value for name, value in store.items() if name in writable}


def export_store(
    client: MemoryClient, instance: str, name: str, out: Path, progress: Progress
) -> dict[str, int]:
    """Write store ``name`` of ``instance`` to ``out``; returns the counts written
    (``sessions``, ``messages``, ``memories``, ``profiles``). Three stages of ``progress``: the
    sessions, the memories, current and superseded, then the actors' profiles. ``KiviDBError``
    from the API."""
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
    written = {"sessions": 0, "messages": 0, "memories": 0, "profiles": 0}
    with _open(partial, "w", named=out) as handle:
        handle.write(json.dumps(header, ensure_ascii=False) + "\n")
        with progress.stage("sessions", counts.sessions if counts else 0, "session") as stage:
            _export_sessions(store, handle, written, stage)
        # The store's counts are of current memories; the export also writes the superseded
        # ones, which the listing's total counts with them.
        every = store.list_memories(limit=1, include_superseded=True).total
        with progress.stage("memories", every, "memory") as stage:
            _export_memories(store, handle, written, stage)
        # No count of profiles comes before the export: the stage's total grows as it goes.
        with progress.stage("profiles", 0, "profile") as stage:
            _export_profiles(store, handle, written, stage)
        handle.write(json.dumps({"end": written}) + "\n")
    problems = check_export(partial, named=out)
    if problems:
        raise TransferError(
            f"the export is not whole, so it was left as {partial}: " + _shown(problems)
        )
    partial.replace(out)
    return written


def _export_sessions(
    store: StoreClient, handle: IO[str], written: dict[str, int], stage: Stage
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
            stage.advance()
        cursor = page.next_cursor
        if cursor is None:
            return


def _export_memories(
    store: StoreClient, handle: IO[str], written: dict[str, int], stage: Stage
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
                    stage.advance()
            cursor = memories.next_cursor
            if cursor is None:
                break
        for line in spool.lines():
            handle.write(line + "\n")
            written["memories"] += 1


def _export_profiles(
    store: StoreClient, handle: IO[str], written: dict[str, int], stage: Stage
) -> None:
    """Write every actor's profile of ``store`` with its fields' histories, once each (a
    page may repeat an actor the scan met before)."""
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.export_profiles(cursor=cursor, limit=MEMORY_PAGE)
        for profile in page.profiles:
            if profile.actor_id in seen:
                continue
            seen.add(profile.actor_id)
            line = {"profile": profile.model_dump(mode="json")}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            written["profiles"] += 1
            stage.advance()
        cursor = page.next_cursor
        if cursor is None:
            return


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
    raise TransferError(
        f"session {session_id} was deleted and started again each time it "
        "was read; export again when it is quiet"
    )


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
        successors = [
            (_moment(f["valid_from"]), i) for i, f in self._links.items() if f["supersedes"]
        ]
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
                self._change(
                    before_id, superseded_by=memory_id, valid_until=moment, updated_at=updated
                )
