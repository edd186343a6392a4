"""The import of ``python -m tools.transfer``: ``import_store`` checks a file and sends it to
a store over the API, sessions in pages, memories in batches that keep each chain whole
(``_MemorySender``), profiles in batches (``_ProfileSender``), noting what is done in
``FILE.progress`` (``Done``) so that a run that stopped goes on where it stopped.

Apart from the export (``tools.transfer_export``) because the two share only the file
(``tools.transfer_file``): the import orders and batches what the file holds for the import
routes, and resumes, where the export pages and mends what the store gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kividb_memory import MemoryClient, StoreClient
from tools.progress import Progress
from tools.transfer_file import TransferError, _chain, _lines, _shown, check_items, items_counted

IMPORT_PAGE = 200
"""Messages per session import call (the route's limit)."""
MEMORY_BATCH = 100
"""Memories per import call (the route's limit)."""
PROFILE_BATCH = 100
"""Profiles per import call (the route's limit); a batch is also cut by ``MEMORY_BATCH_BYTES``."""
MEMORY_BATCH_BYTES = 700_000
"""A batch is also cut before its JSON passes this size (the API takes bodies up to 1 MiB)."""


class Done:
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
    target did not have), memories written and those left out because their time was up,
    actors' profiles written, and the line it resumed after (0: from the start)."""

    sessions: int = 0
    messages_added: int = 0
    memories: int = 0
    expired: int = 0
    profiles: int = 0
    resumed_after: int = 0
    notes: list[str] = field(default_factory=list)


def import_store(
    client: MemoryClient, instance: str, name: str, source: Path, progress: Progress
) -> Imported:
    """Import the export ``source`` into store ``name`` of ``instance`` (created when missing;
    its settings set to the export's). Two stages of ``progress``: the file's check (its
    items), then the import (the items, a resumed run counting those done before as done).
    ``TransferError`` for a bad file (nothing is written then), ``KiviDBError`` from the API."""
    with progress.stage("check the file", 1, "file") as stage:
        header, items, end = _lines(source)
        stage.note(f"{len(items):,} items")
        if len(items) != items_counted(end):
            raise TransferError(f"{source} holds {len(items)} items, its end line says otherwise")
        problems = check_items(items)
        if problems:
            raise TransferError(
                f"{source} is not whole, so nothing was imported: " + _shown(problems)
            )
        stage.advance()
    done = Imported()
    for key, had in (header.get("had_keys") or {}).items():
        if had:
            done.notes.append(
                f"the source store had a {key}; give it again with PUT (it is never exported)"
            )
    client.put_store(instance, name, **header["settings"])
    store = client.store(instance, name)
    kept = Done(source, f"{client.base_url} {instance} {name}")
    done.resumed_after = kept.done
    sender = _MemorySender(store, kept, done)
    profiles = _ProfileSender(store, kept, done)
    kinds = [_kind(line) for line in items]
    with progress.stage("items", len(items), "item") as stage:
        stage.advance(kept.done)
        if kept.done:
            stage.note(f"resumed after item {kept.done:,}")
        for unit in _units(_import_order(kinds), kinds, kept.done):
            number, at = unit[0]
            item = json.loads(items[at]) if kinds[at][0] is None else {}
            if "session" in item:
                sender.flush()
                profiles.flush()
                done.messages_added += _import_session(store, item["session"])
                done.sessions += 1
                kept.save(number)
            elif "profile" in item:
                sender.flush()
                profiles.add(number, item["profile"])
            else:
                profiles.flush()
                sender.add([(number, items[at]) for number, at in unit])
            stage.advance(len(unit))
        sender.flush()
        profiles.flush()
    kept.finish()
    return done


Kind = tuple[str | None, str | None, str | None]
"""What the import's order needs of an item: a memory's id, ``supersedes`` and
``superseded_by`` (all None for a session or a profile)."""


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


class _ProfileSender:
    """Profile import batches of at most ``PROFILE_BATCH`` profiles and ``MEMORY_BATCH_BYTES``
    of JSON. A profile larger than that alone (20 fields, each with 20 versions of 20
    200-character items, pass 1 MiB) goes as several, each naming some of its fields: an import
    replaces only the fields it names, so the pieces make the whole profile, and one sent again
    after a stop changes nothing. The progress is saved after each batch."""

    def __init__(self, store: StoreClient, progress: Done, done: Imported) -> None:
        self._store = store
        self._progress = progress
        self._done = done
        self._batch: list[dict[str, Any]] = []
        self._bytes = 0
        self._end = 0

    def add(self, number: int, profile: dict[str, Any]) -> None:
        """Send item ``number``, an exported profile."""
        for piece in _pieces(profile):
            size = _json_bytes(piece)
            if self._batch and (
                len(self._batch) == PROFILE_BATCH or self._bytes + size > MEMORY_BATCH_BYTES
            ):
                self.flush()
            self._batch.append(piece)
            self._bytes += size
        self._done.profiles += 1
        self._end = number

    def flush(self) -> None:
        """Send the batch gathered so far."""
        if self._batch:
            self._store.import_profiles(self._batch)
            self._progress.save(self._end)
            self._batch, self._bytes = [], 0


def _pieces(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """``profile`` whole when its JSON fits ``MEMORY_BATCH_BYTES``, else one piece a field
    (its current entry and its versions: at most 21 values of 4,000 characters)."""
    if _json_bytes(profile) <= MEMORY_BATCH_BYTES:
        return [profile]
    fields, history = profile.get("fields") or {}, profile.get("history") or {}
    return [
        {
            "actor_id": profile["actor_id"],
            "fields": {name: fields[name]} if name in fields else {},
            "history": {name: history[name]} if name in history else {},
        }
        for name in sorted(set(fields) | set(history))
    ]


def _json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


class _MemorySender:
    """Memory import batches of at most ``MEMORY_BATCH`` memories and ``MEMORY_BATCH_BYTES``,
    a chain never split across two unless it is longer than one: then it goes in segments, each
    but the last ending with a memory sent as current and sent again, as it is, at the start of
    the next, so that every chain in the target is whole after each batch. The progress is saved
    after each batch (the item before a memory sent as current, which is sent again)."""

    def __init__(self, store: StoreClient, progress: Done, done: Imported) -> None:
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
