"""Export and import under a hostile tester (issue "Trust, second round"): an export of a store
being written imports whole (a session is one moment's, a chain of memories is whole), an
import refuses whatever would break a session or a chain (naming the field, writing nothing),
and export pages fit the answer budget.

The threaded export of a store being written, end to end through ``tools.transfer``, is in
``tests/e2e/test_transfer_http.py``; here the tool's pieces (``_one_moment``, ``_MemorySpool``,
``_MemorySender``, ``check_items``) run on what the core's export gives, step by step."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography.fernet import Fernet
from pydantic import ValidationError

from agent_memory.answers import wire_bytes
from agent_memory.clock import SystemClock, to_ms
from agent_memory.errors import ValidationFailed
from agent_memory.memories.models import MemoryIn
from agent_memory.memories.service import Memories
from agent_memory.memories.transfer import MemoryTransfer
from agent_memory.memories.transfer_models import MemoryImportBatch
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import Selection
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.sessions.transfer import SessionImport, SessionTransfer
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.stores import sessions_of
from tools import transfer_export, transfer_file, transfer_import

DIM = 4


class Side:
    """A store with the services the tests use."""

    def __init__(self, url: str, name: str) -> None:
        self.client = database_client(url)
        self.binary = database_client(url, binary=True)
        self.clock = SystemClock()
        self.stores = Stores(self.client, "db", FernetCipher(Fernet.generate_key()), self.clock)
        self.name = name
        self.config, _ = self.stores.put(name, StorePut(dimensions=DIM, dedupe_threshold=1.0))
        self.sessions = sessions_of(self.stores, self.config)
        self.memories = Memories(
            StoreDatabase(self.client, self.binary, self.config, self.clock),
            NoEmbedder(DIM),
            IndexCache(),
            "trust",
        )
        self.session_transfer = SessionTransfer(
            StoreDatabase(self.client, self.client, self.config, self.clock)
        )
        self.memory_transfer = MemoryTransfer(
            StoreDatabase(self.client, self.binary, self.config, self.clock)
        )

    def all_memories(self) -> dict[str, dict[str, Any]]:
        """Every live memory as the export gives it (JSON), by id."""
        found, cursor = {}, None
        while True:
            page = self.memory_transfer.export(cursor, 100)
            found.update((m.id, m.model_dump(mode="json")) for m in page.memories)
            cursor = page.next_cursor
            if cursor is None:
                return found

    def session_pages(self, session_id: str, limit: int, budget: int | None = None) -> list:
        pages, after = [], 0
        while True:
            kwargs = {} if budget is None else {"budget": budget}
            page = self.session_transfer.export(session_id, after, limit, **kwargs)
            pages.append(page)
            if page.next_after_seq is None:
                return pages
            after = page.next_after_seq


@pytest.fixture
def source(redis_url: str) -> Iterator[Side]:
    side = Side(redis_url, unique("src"))
    yield side
    side.stores.delete(side.name)


@pytest.fixture
def target(redis_url: str) -> Iterator[Side]:
    side = Side(redis_url, unique("dst"))
    yield side
    side.stores.delete(side.name)


def _vector(i: int) -> list[float]:
    return [float(np.cos(i)), float(np.sin(i)), 0.3, 0.1 * (i % 3)]


def _events(*texts: str) -> EventsRequest:
    return EventsRequest(actor_id="ann", events=[EventIn(role="user", content=t) for t in texts])


def _session_body(session: dict[str, Any], messages: list[dict[str, Any]]) -> SessionImport:
    state = {
        k: v for k, v in session.items() if k not in ("session_id", "messages", "next_after_seq")
    }
    return SessionImport.model_validate({**state, "messages": messages}, strict=False)


def _batch(memories: list[dict[str, Any]]) -> MemoryImportBatch:
    return MemoryImportBatch.model_validate({"memories": memories}, strict=False)


def _lines_memories(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line)["memory"] for line in lines]


def _current_at(side: Side, actor: str, moment: datetime) -> list[str]:
    selection = Selection(as_of=to_ms(moment))
    return sorted(m.id for m in side.memories.page(0, 100, actor, None, selection).memories)


# --- A: exports of a store being written import whole ------------------------------------------


def test_a_session_appended_to_and_folded_between_its_pages_is_exported_as_one_moment(
    source, target
):
    """The bug: the tool took the first page's state and every page's messages, so a session
    appended to between its pages had messages past its message_count (its import: 422), and
    one folded between them lost messages its state said were kept. Now: the last page's
    state, with the messages after its folded_seq and up to its message_count."""
    source.sessions.append("s", _events(*(f"m{n}" for n in range(1, 11))))
    meta = source.config.keys().session("s")
    pages = []
    after = 0
    while True:
        page = source.session_transfer.export("s", after, 4)
        pages.append(page.model_dump(mode="json"))
        if len(pages) == 1:  # a writer appends between the first page and the second
            source.sessions.append("s", _events(*(f"m{n}" for n in range(11, 16))))
            # and extraction and summarization move on (as their scripts do)
            source.client.hset(
                meta.meta, mapping={"read_seq": 12, "folded_seq": 6, "summary": "m1 to m6"}
            )
            source.client.zremrangebyscore(meta.messages, "-inf", 6)
        if page.next_after_seq is None:
            break
        after = page.next_after_seq
    assert [m["seq"] for p in pages for m in p["messages"]] == [
        1,
        2,
        3,
        4,
        7,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
    ]
    glued = {**pages[0], "messages": [m for p in pages for m in p["messages"]]}  # as before
    assert transfer_file.session_problems(glued) == [
        "its messages run from 1 to 15, outside folded_seq + 1 to message_count (1 to 10)"
    ]
    with pytest.raises(ValidationError, match="must lie from folded_seq \\+ 1 to message_count"):
        _session_body(glued, glued["messages"][-5:])
    session = transfer_export._one_moment(pages)
    assert session is not None and transfer_file.session_problems(session) == []
    assert (session["message_count"], session["read_seq"], session["folded_seq"]) == (15, 12, 6)
    assert session["summary"] == "m1 to m6"
    assert [m["content"] for m in session["messages"]] == [f"m{n}" for n in range(7, 16)]
    target.session_transfer.import_page("s", _session_body(session, session["messages"]))
    (moved,) = [p.model_dump(mode="json") for p in target.session_pages("s", 1000)]
    assert {k: v for k, v in moved.items() if k != "next_after_seq"} == session
    # a session deleted and started again between its pages is read again, not mixed
    other = [{**pages[0]}, {**pages[-1], "created_at": "2030-01-01T00:00:00Z"}]
    assert transfer_export._one_moment(other) is None


def test_chains_read_across_supersedes_are_exported_whole_and_import(source, target):
    """The bug: a memory read while current and its successor read later were both current in
    the file (a fork), and a memory read after it was closed had its successor missing from
    the file (no current version in the copy). Now the tool keeps each memory as last read and
    repairs each chain to one moment: closed by a successor in the file, or current."""
    kept = {}
    for fact in ("diet", "city", "job"):
        kept[fact] = source.memories.add(
            MemoryIn(text=f"{fact} 1", actor_id="ann", vector=_vector(len(kept)))
        ).memory.id
    before = source.all_memories()
    for fact in ("diet", "city", "job"):
        kept[fact + "2"] = source.memories.add(
            MemoryIn(
                text=f"{fact} 2", actor_id="ann", vector=_vector(len(kept)), supersedes=kept[fact]
            )
        ).memory.id
    after = source.all_memories()
    readings = [
        before[kept["diet"]],  # read current, its successor read later
        after[kept["diet2"]],
        after[kept["city"]],  # read closed, its successor never read
        after[kept["job2"]],  # its predecessor never read (as when its time is up)
    ]
    links = {m["id"]: transfer_file._link_fields(m) for m in readings}
    assert transfer_file.chain_problems(links) != []
    with pytest.raises(ValidationFailed) as refused:  # what the tool sent before
        target.memory_transfer.import_batch(_batch(readings))
    assert [d["field"] for d in refused.value.details] == [
        "memories.1.supersedes",
        "memories.2.superseded_by",
        "memories.3.supersedes",
    ]
    assert target.all_memories() == {}
    with transfer_export._MemorySpool() as spool:
        for memory in readings:
            spool.add(memory)
        spool.add(before[kept["diet"]])  # read twice: the last reading counts
        lines = list(spool.lines())
    assert transfer_file.check_items(lines) == []
    written = {m["id"]: m for m in _lines_memories(lines)}
    assert written[kept["diet"]] == after[kept["diet"]]  # closed, as after the supersede
    # current, as before it (its updated_at as the supersede left it: the one before is gone)
    assert written[kept["city"]] == {
        **before[kept["city"]],
        "updated_at": after[kept["city"]]["updated_at"],
    }
    assert written[kept["job2"]] == {**after[kept["job2"]], "supersedes": None}
    assert list(written) == [kept["diet"], kept["diet2"], kept["city"], kept["job2"]]
    target.memory_transfer.import_batch(_batch(list(written.values())))
    assert target.all_memories() == written
    assert [link.id for link in target.memories.get(kept["diet2"]).chain] == [
        kept["diet"],
        kept["diet2"],
    ]
    assert _current_at(target, "ann", datetime.now(UTC)) == sorted(
        [kept["diet2"], kept["city"], kept["job2"]]
    )


def test_an_export_is_the_store_as_it_was_when_its_first_memory_page_was_read(source):
    """A version created after the first page's read_at (which HSCAN may or may not give) is
    left out, and the one it closed is kept as it was then: current. So a chain superseded while
    it was read can never come out as two current pieces (one whose successor was missed, one
    that followed it)."""
    first = source.memories.add(MemoryIn(text="v1", actor_id="ann", vector=_vector(1))).memory
    page = source.memory_transfer.export(None, 100)
    second = source.memories.add(
        MemoryIn(text="v2", actor_id="ann", vector=_vector(2), supersedes=first.id)
    ).memory
    third = source.memories.add(
        MemoryIn(text="v3", actor_id="ann", vector=_vector(3), supersedes=second.id)
    ).memory
    after = source.all_memories()
    assert page.read_at is not None and [m.id for m in page.memories] == [first.id]
    for readings in (
        [after[first.id], after[third.id]],  # v2 missed by the scan
        [after[first.id], after[second.id], after[third.id]],
    ):
        with transfer_export._MemorySpool() as spool:
            spool.moment = page.read_at
            for memory in readings:
                spool.add(memory)
            lines = list(spool.lines())
        assert transfer_file.check_items(lines) == []
        (only,) = _lines_memories(lines)
        assert (only["id"], only["superseded_by"], only["valid_until"]) == (first.id, None, None)
    # without the moment, the missed version leaves two current pieces of one fact
    with transfer_export._MemorySpool() as spool:
        for memory in (after[first.id], after[third.id]):
            spool.add(memory)
        pieces = _lines_memories(list(spool.lines()))
    assert [m["valid_until"] for m in pieces] == [None, None]


class _CoreStore:
    """What ``tools.transfer_import._MemorySender`` calls of a ``StoreClient``, on a core store."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.batches: list[list[str]] = []

    def import_memories(self, memories: list[dict[str, Any]]) -> Any:
        self.batches.append([m["id"] for m in memories])
        result = self.side.memory_transfer.import_batch(_batch(memories))
        current = [m.id for m in self.side.memories.page(0, 100, "ann", None).memories]
        assert len(current) == 1, "after every batch, the chain has one current version"
        return result


def test_a_chain_longer_than_a_batch_is_imported_whole_after_every_batch(
    source, target, tmp_path: Path, monkeypatch
):
    monkeypatch.setattr(transfer_import, "MEMORY_BATCH", 3)
    last = source.memories.add(MemoryIn(text="v0", actor_id="ann", vector=_vector(0))).memory.id
    for n in range(1, 8):
        last = source.memories.add(
            MemoryIn(text=f"v{n}", actor_id="ann", vector=_vector(n), supersedes=last)
        ).memory.id
    with transfer_export._MemorySpool() as spool:
        for memory in source.all_memories().values():
            spool.add(memory)
        lines = list(spool.lines())
    chain = [m["id"] for m in _lines_memories(lines)]
    assert [m["text"] for m in _lines_memories(lines)] == [f"v{n}" for n in range(8)]
    store = _CoreStore(target)
    progress = transfer_import.Done(tmp_path / "f.jsonl", "core")
    done = transfer_import.Imported()
    sender = transfer_import._MemorySender(store, progress, done)  # type: ignore[arg-type]
    sender.add(list(enumerate(lines, start=1)))
    sender.flush()
    # three at most per batch; each but the last ends with one sent again at the next's start
    assert store.batches == [chain[0:3], chain[2:5], chain[4:7], chain[6:8]]
    assert progress.done == 8 and done.memories == 8
    assert target.all_memories() == source.all_memories()


# --- B: imports that would break a session or a chain are refused ------------------------------


def _session(**fields: Any) -> dict[str, Any]:
    day = datetime.now(UTC) - timedelta(hours=1)
    return {
        "message_count": 30,
        "read_seq": 24,
        "folded_seq": 0,
        "created_at": day.isoformat(),
        "last_event_at": day.isoformat(),
        "expires_at": (day + timedelta(days=30)).isoformat(),
        "messages": [],
        **fields,
    }


def _pending(**fields: Any) -> str:
    item = {
        "text": "Ann moved to Lisbon",
        "type": "semantic",
        "topics": ["home"],
        "supersedes": None,
        "occurred_at": None,
        "messages": [25, 26],
    }
    return json.dumps({"from": 25, "to": 30, "memories": [item], **fields})


def _errors(body: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as refused:
        SessionImport.model_validate(body, strict=False)
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in refused.value.errors()]


@pytest.mark.parametrize(
    ("pending", "problem"),
    [
        ("[1,2]", "Input should be an object"),
        ('"a string"', "Input should be an object"),
        ("null", "Input should be an object"),
        ('{"from": 25, "memories": []}', "to: Field required"),
        (_pending(to=10**15), "to must lie from 25 (from) to 30 (message_count)"),
        (_pending(to=24), "to must lie from 25 (from) to 30 (message_count)"),
        (_pending(**{"from": 3}), "from must be read_seq + 1 (25)"),
        (_pending(**{"from": True}), "from: Input should be a valid integer"),
        (_pending(extra=1), "extra: Extra inputs are not permitted"),
        (_pending(memories=[{"type": "semantic", "topics": []}]), "memories.0.text: Field"),
        (
            _pending(memories=[{"text": "x", "type": "semantic", "topics": [], "messages": [31]}]),
            "memories.0.messages: 31 is outside from to to",
        ),
        (
            _pending(
                memories=[{"text": "x", "type": "semantic", "topics": [], "occurred_at": 10**20}]
            ),
            "memories.0.occurred_at",
        ),
        (
            _pending(
                memories=[
                    {"text": "x", "type": "semantic", "topics": [], "supersedes": "not an id"}
                ]
            ),
            "memories.0.supersedes",
        ),
        (
            _pending(memories=[{"text": "x", "type": "semantic", "topics": []}] * 51),
            "memories: List should have at most 50 items",
        ),
    ],
)
def test_a_pending_answer_extraction_could_not_have_written_is_refused_naming_pending(
    target, pending, problem
):
    errors = _errors(_session(pending=pending))
    assert [field for field, _ in errors] == ["pending"]
    assert problem in errors[0][1]
    assert target.session_transfer.ids(None, 100).session_ids == []


def test_the_pending_check_takes_what_extraction_writes_and_agrees_with_its_bounds():
    from agent_memory.background import prompts
    from agent_memory.memories import models
    from agent_memory.sessions import transfer as sessions_transfer

    assert (sessions_transfer.PENDING_MEMORIES, sessions_transfer.PENDING_MEMORY_CHARS) == (
        prompts.MAX_MEMORIES_PER_RUN,
        prompts.MAX_MEMORY_CHARS,
    )
    assert (sessions_transfer.PENDING_TOPICS, sessions_transfer.PENDING_TOPIC_CHARS) == (
        models.MAX_TOPICS,
        models.MAX_TOPIC_CHARS,
    )
    answer = {
        "memories": [
            {
                "text": "  Moved to Lisbon " + "x" * 3000,
                "type": "place",
                "topics": ["Home", " "],
                "occurred_at": "2025-05-08",
                "messages": [26, 25, 26, "x"],
                "supersedes": "mem_00000000000000000001",
            },
            "A bare string is a memory too",
        ]
    }
    items, _ = prompts.ExtractionAnswer.read(answer).items()
    kept = [
        {
            "text": m.text,
            "type": m.type or "semantic",
            "topics": m.topics,
            "supersedes": m.supersedes,
            "occurred_at": m.occurred_at,
            "messages": m.messages,
        }
        for m in items
    ]
    written = json.dumps(
        {"from": 25, "to": 30, "memories": kept}, ensure_ascii=False, separators=(",", ":")
    )
    assert sessions_transfer.pending_problem(written, 24, 30) is None


def test_a_pending_answer_as_extraction_writes_it_is_kept(target):
    body = SessionImport.model_validate(_session(pending=_pending()), strict=False)
    target.session_transfer.import_page("s", body)
    (page,) = target.session_pages("s", 10)
    assert (page.pending, page.read_seq, page.message_count) == (_pending(), 24, 30)


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"read_seq": 31}, "read_seq", "must be at most message_count (30)"),
        ({"folded_seq": 25}, "folded_seq", "must be at most read_seq (24)"),
        ({"last_event_at": "2000-01-01T00:00:00Z"}, "last_event_at", "not be before created_at"),
        ({"last_run_at": "2000-01-01T00:00:00Z"}, "last_run_at", "from created_at to before"),
        ({"failures": 2}, "last_run_at", "must be given with failures"),
        (
            {"failures": 2, "last_run_at": datetime.now(UTC).isoformat()},
            "last_error",
            "must be given when failures is above 0",
        ),
        (
            {
                "messages": [
                    {
                        "seq": 31,
                        "role": "user",
                        "content": "x",
                        "created_at": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            "messages.0.seq",
            "must lie from folded_seq + 1 to message_count (1 to 30)",
        ),
    ],
)
def test_cursors_and_times_the_session_contradicts_are_refused_naming_the_field(
    fields, field, problem
):
    errors = _errors(_session(**fields))
    assert errors[0][0] == field and problem in errors[0][1], errors


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _memory(memory_id: str, **fields: Any) -> dict[str, Any]:
    """An exported memory of actor ann kept at T0 (times as ISO text: ``at`` hours after T0)."""
    vector = base64.b64encode(np.array([1, 0, 0, 0], "<f4").tobytes()).decode()
    return {
        "id": memory_id,
        "text": f"fact {memory_id[-2:]}",
        "actor_id": "ann",
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        "expires_at": (datetime.now(UTC) + timedelta(days=30)).isoformat(),
        "vector": vector,
        **fields,
    }


def _at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


A, B, C, D = (f"mem_{n:020x}" for n in (0xA1, 0xB2, 0xC3, 0xD4))


def _chain_ab() -> list[dict[str, Any]]:
    """A, replaced by B at T0 + 1 h."""
    return [
        _memory(A, superseded_by=B, valid_until=_at(1), updated_at=_at(1)),
        _memory(B, supersedes=A, created_at=_at(1), updated_at=_at(1), valid_from=_at(1)),
    ]


@pytest.mark.parametrize(
    ("memories", "details"),
    [
        # a cycle: A -> B -> C -> A, all at one time (so every interval and link agrees)
        (
            [
                _memory(A, supersedes=C, superseded_by=B, valid_until=_at(0)),
                _memory(B, supersedes=A, superseded_by=C, valid_until=_at(0)),
                _memory(C, supersedes=B, superseded_by=A, valid_until=_at(0)),
            ],
            [
                ("memories.0.superseded_by", "makes a cycle"),
                ("memories.1.superseded_by", "makes a cycle"),
                ("memories.2.superseded_by", "makes a cycle"),
            ],
        ),
        # a fork: B and C both replace A
        (
            [*_chain_ab(), _memory(C, supersedes=A, created_at=_at(2), updated_at=_at(2))],
            [("memories.2.supersedes", f"names {A}, whose superseded_by is {B}, not this memory")],
        ),
        # a link to an id that is nowhere
        (
            [_memory(A, superseded_by=D, valid_until=_at(1))],
            [("memories.0.superseded_by", "names no live memory of this actor")],
        ),
        (
            [_memory(B, supersedes=D)],
            [
                (
                    "memories.0.supersedes",
                    "names no memory of this actor in this batch or this store",
                )
            ],
        ),
        # across actors
        (
            [_chain_ab()[0], {**_chain_ab()[1], "actor_id": "bob"}],
            [
                ("memories.0.superseded_by", f"names {B}, another actor's memory"),
                ("memories.1.supersedes", f"names {A}, another actor's memory"),
            ],
        ),
        # times: the successor's valid_from is not the predecessor's valid_until
        (
            [
                _chain_ab()[0],
                {
                    **_chain_ab()[1],
                    "created_at": _at(2),
                    "updated_at": _at(2),
                    "valid_from": _at(2),
                },
            ],
            [
                ("memories.0.valid_until", f"must be the valid_from of {B}"),
                ("memories.1.valid_from", f"must be the valid_until of {A}"),
            ],
        ),
        # A names B, B names nothing
        (
            [_chain_ab()[0], {**_chain_ab()[1], "supersedes": None}],
            [("memories.0.superseded_by", f"names {B}, whose supersedes is null, not this memory")],
        ),
    ],
)
def test_supersede_graphs_the_api_could_not_have_made_are_refused_and_nothing_is_written(
    target, memories, details
):
    with pytest.raises(ValidationFailed) as refused:
        target.memory_transfer.import_batch(_batch(memories))
    got = [(d["field"], d["problem"]) for d in refused.value.details]
    assert len(got) == len(details), got
    for (field, problem), (want_field, want) in zip(got, details, strict=True):
        assert field == want_field and want in problem, got
    assert target.all_memories() == {}


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"valid_from": "2099-01-01T00:00:00Z"}, "valid_from", "must be before expires_at"),
        (
            {"superseded_by": B, "valid_until": "2099-01-01T00:00:00Z"},
            "valid_until",
            "must not be after expires_at",
        ),
        (
            {"superseded_by": B, "valid_until": "2025-01-01T00:00:00Z"},
            "valid_until",
            "must not be before valid_from",
        ),
        ({"valid_from": "2025-01-01T00:00:00Z"}, "valid_from", "must not be before created_at"),
        (
            {"supersedes": B, "superseded_by": B, "valid_until": _at(1)},
            "superseded_by",
            "must not be the memory it supersedes",
        ),
        (
            {"versions": [{"text": "x", "type": "semantic", "changed_at": _at(5)}]},
            "versions.0.changed_at",
            "must lie from created_at to updated_at",
        ),
    ],
)
def test_times_a_memory_contradicts_are_refused_naming_the_field(fields, field, problem):
    with pytest.raises(ValidationError) as refused:
        _batch([_memory(A, **fields)])
    errors = [(".".join(map(str, e["loc"])), e["msg"]) for e in refused.value.errors()]
    assert errors[0][0] == f"memories.0.{field}" and problem in errors[0][1], errors


def test_links_resolve_against_the_store_and_forks_through_it_are_refused(target):
    target.memory_transfer.import_batch(_batch(_chain_ab()))
    before = target.all_memories()
    # C claims A while the store has A replaced by B: a fork
    with pytest.raises(ValidationFailed) as refused:
        target.memory_transfer.import_batch(
            _batch(
                [_memory(C, supersedes=A, created_at=_at(2), updated_at=_at(2), valid_from=_at(2))]
            )
        )
    assert refused.value.details[0]["field"] == "memories.0.supersedes"
    # A replaced by C now, with B of the store still naming A: a fork too
    with pytest.raises(ValidationFailed) as refused:
        target.memory_transfer.import_batch(
            _batch(
                [
                    _memory(A, superseded_by=C, valid_until=_at(2), updated_at=_at(2)),
                    _memory(
                        C, supersedes=A, created_at=_at(2), updated_at=_at(2), valid_from=_at(2)
                    ),
                ]
            )
        )
    assert refused.value.details == [
        {
            "field": "memories.0.superseded_by",
            "problem": f"memory {B} of this store supersedes this one: a memory is replaced by one "
            "memory at most",
        }
    ]
    assert target.all_memories() == before
    # the chain goes on from the store: C replaces B, B (closed now) sent with it
    b_closed = {**_chain_ab()[1], "superseded_by": C, "valid_until": _at(2), "updated_at": _at(2)}
    c = _memory(C, supersedes=B, created_at=_at(2), updated_at=_at(2), valid_from=_at(2))
    target.memory_transfer.import_batch(_batch([b_closed, c]))
    # and a memory naming a store memory in supersedes imports with it
    target.memory_transfer.import_batch(
        _batch(
            [
                {**c, "superseded_by": D, "valid_until": _at(3), "updated_at": _at(3)},
                _memory(D, supersedes=C, created_at=_at(3), updated_at=_at(3), valid_from=_at(3)),
            ]
        )
    )
    for hours, current in ((0.5, A), (1.5, B), (2.5, C), (3.5, D)):
        assert _current_at(target, "ann", T0 + timedelta(hours=hours)) == [current]
    assert [link.id for link in target.memories.get(D).chain] == [A, B, C, D]


def test_a_supersede_racing_an_import_is_checked_again_and_never_makes_a_fork(target, monkeypatch):
    """The batch closes A by B; between its check and its write, the API supersedes A by C.
    Each actor's records are written only at the generation they were checked at, so the
    batch is checked again, against C: refused, and what it had claimed is taken back."""
    target.memory_transfer.import_batch(_batch([_memory(A)]))
    claim = MemoryTransfer._index
    raced: list[str] = []

    def racing(self, rows, now_ms):
        if not raced:
            kept = target.memories.add(
                MemoryIn(text="fact c", actor_id="ann", vector=_vector(3), supersedes=A)
            )
            raced.append(kept.memory.id)
        return claim(self, rows, now_ms)

    monkeypatch.setattr(MemoryTransfer, "_index", racing)
    with pytest.raises(ValidationFailed) as refused:
        target.memory_transfer.import_batch(_batch(_chain_ab()))
    assert refused.value.details == [
        {
            "field": "memories.0.superseded_by",
            "problem": f"memory {raced[0]} of this store supersedes this one: a memory is replaced "
            "by one memory at most",
        }
    ]
    assert sorted(target.all_memories()) == sorted([A, raced[0]])
    assert target.memories.get(A).superseded_by == raced[0]
    assert target.memories.count() == 1
    assert [m.id for m in target.memories.page(0, 100, None, None).memories] == [raced[0]]
    expiry = target.config.keys().memory_partition(B).memory_expiry
    assert target.client.zscore(expiry, B) is None  # B's claim was taken back


def test_an_older_version_whose_time_is_up_still_resolves_the_link_to_it(target):
    """The API lets an old version expire on its own while its successor stays: a batch holding
    both, the old one's time up, keeps the successor (naming it, as the source did)."""
    old, new = _chain_ab()
    old = {**old, "expires_at": _at(2)}  # long past
    result = target.memory_transfer.import_batch(_batch([old, new]))
    assert (result.imported, result.expired) == (1, [A])
    assert target.memories.get(B).supersedes == A


# --- C: export pages fit the answer budget -----------------------------------------------------


def test_session_export_pages_are_cut_to_the_answer_budget(source):
    """Each message carries 5,000 quotes: 10,000 bytes of JSON, 20,000 as Lambda carries it."""
    texts = ['"' * 5000 + str(n) for n in range(12)]
    source.sessions.append("big", _events(*texts))
    budget = 65_536
    pages = source.session_pages("big", 1000, budget=budget)
    assert len(pages) == 4
    for page in pages:
        assert wire_bytes(page) <= budget and page.messages
    assert [m.content for p in pages for m in p.messages] == texts
    # the default budget holds them all on one page, as before
    assert len(source.session_pages("big", 1000)) == 1
    # one message over the budget still comes, alone (it cannot happen with the real budget)
    single = source.session_pages("big", 1000, budget=1000)
    assert [len(p.messages) for p in single] == [1] * 12


def test_memory_export_pages_are_cut_to_the_answer_budget_and_miss_nothing(source):
    """60 memories of one actor, each about 8.7 KB as carried: a page holds one, so every
    hash bucket that holds two of them is cut inside its HSCAN step too."""
    ids = set()
    for n in range(60):
        text = '"' * 2000 + f" fact {n}"
        ids.add(
            source.memories.add(MemoryIn(text=text, actor_id="ann", vector=_vector(n))).memory.id
        )
    for budget, most in ((12_000, 1), (40_000, 4)):
        seen, cursor, inside = [], None, 0
        while True:
            page = source.memory_transfer.export(cursor, 100, budget=budget)
            assert 1 <= len(page.memories) <= most
            assert wire_bytes(page) <= budget
            seen += [m.id for m in page.memories]
            cursor = page.next_cursor
            if cursor is None:
                break
            inside += "." in cursor.partition(":")[0]
        assert set(seen) == ids
        assert len(seen) - len(set(seen)) <= 5  # a memory may be on two pages, rarely
        if most == 1:
            assert inside, "some hash bucket held two memories: a page ended inside its step"
    with pytest.raises(ValidationFailed):
        source.memory_transfer.export("0.1.mem_x:ann", 10)


def test_a_memory_written_after_an_export_page_was_read_is_newer_than_its_read_at(source):
    """Times are kept to the millisecond: a write just after a page was read (on the same clock)
    is stamped after the page's read_at, never equal to it, so it can never pass for one the
    page saw. Many tries, as the two land in one millisecond only some of the time."""
    for i in range(200):
        page = source.memory_transfer.export(None, 1)
        added = source.memories.add(MemoryIn(text=f"n{i}", actor_id="bo", vector=_vector(i)))
        assert page.read_at is not None and added.memory.created_at > page.read_at
