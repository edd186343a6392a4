"""Moving a store with ``python -m tools.transfer`` over HTTP: from the local stack on a single
node to a local stack on a Redis Cluster, compared field by field; twice keeps one copy; an
interrupted import goes on where it stopped; a store exported while writers append and supersede
imports whole; export pages within the answer budget (the cluster's stack has a low one); and
the import routes' refusals, exactly."""

from __future__ import annotations

import base64
import gzip
import json
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

from kividb_memory import MemoryClient, StoreClient
from local.bootstrap import start_redis_cluster
from local.launch import running_stack
from tests.support.common import unique
from tests.support.stack import Stack
from tools import transfer, transfer_export, transfer_file, transfer_import

CLUSTER_KEY = "kvm_e2e_cluster_transfer_0123456789abcdefghijk"
DIM = 4
CLUSTER_BUDGET = 1_048_576
"""The answer budget of the cluster's stack (``KIVIDB_ANSWER_BUDGET_BYTES``): the lowest the
setting takes, so that its export pages are cut by bytes."""


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The local stack on a Redis Cluster of three primaries of its own."""
    folder = tmp_path_factory.mktemp("transfer-cluster")
    cluster = start_redis_cluster(folder / "cluster")
    env = {
        "REDIS_URL": cluster.url,
        "KIVIDB_API_KEY": CLUSTER_KEY,
        "KIVIDB_LOCAL_DIR": str(folder / "local"),
        "KIVIDB_WORKERS": "2",
        "KIVIDB_ANSWER_BUDGET_BYTES": str(CLUSTER_BUDGET),
    }
    try:
        with running_stack(env, log=folder / "stack.log", timeout=120) as (url, _):
            yield Stack(url, CLUSTER_KEY, cluster.url)
    finally:
        cluster.stop()


PROFILE_FIELDS = [
    {"name": "city", "description": "Where the user lives"},
    {"name": "pets", "description": "The user's pets", "type": "list"},
    {"name": "age", "description": "How old the user is", "type": "number"},
]


def _vector(i: int) -> list[float]:
    return [float(np.cos(i)), float(np.sin(i)), 0.2, 0.05 * i]


def _fill(client: MemoryClient, name: str) -> None:
    client.put_store(
        "local",
        name,
        dimensions=DIM,
        dedupe_threshold=1.0,
        summarize_after=50,
        custom_types=[{"name": "order_issue", "description": "A problem with an order"}],
        profile_fields=PROFILE_FIELDS,
    )
    store = client.store("local", name)
    store.update_profile("user-0", {"city": "Paris", "pets": ["Rex"]})
    store.update_profile("user-0", {"city": "Lisbon", "age": 40})
    store.update_profile("user-0", {"age": None})
    store.update_profile("user-1", {"pets": ["Mia", "Ósc ✨"]})
    for i in range(12):
        store.add_events(
            f"chat-{i}",
            [
                {"role": "user", "content": f"hello {i} ✨"},
                {"role": "assistant", "content": "hi", "name": "bot"},
            ],
            actor_id=f"user-{i % 3}",
        )
    store.add_events("long", [{"role": "user", "content": f"m {n}"} for n in range(100)])
    store.add_events("long", [{"role": "user", "content": f"m {n}"} for n in range(100, 150)])
    old = store.add_memory(
        "Lives in Paris",
        "user-0",
        vector=_vector(1),
        topics=["home"],
        metadata={"source": "crm"},
        importance=0.5,
    )
    store.add_memory("Lives in Lisbon", "user-0", vector=_vector(2), supersedes=old.id)
    changed = store.add_memory("Order 12 is late", "user-1", type="order_issue", vector=_vector(3))
    store.update_memory(changed.id, text="Order 12 arrived late", vector=_vector(4))
    for i in range(130):
        store.add_memory(f"fact number {i}", f"user-{i % 7}", vector=_vector(10 + i))


def _export(stack: Stack, name: str, path: Path, monkeypatch) -> tuple[dict, dict, dict]:
    header, sessions, memories, _ = _export_all(stack, name, path, monkeypatch)
    return header, sessions, memories


def _export_all(stack: Stack, name: str, path: Path, monkeypatch) -> tuple[dict, dict, dict, dict]:
    """The header, sessions, memories and profiles (by actor) of an export of ``name``."""
    monkeypatch.setenv("KIVIDB_API_KEY", stack.api_key)
    argv = [
        "export",
        "--url",
        stack.url,
        "--instance",
        "local",
        "--store",
        name,
        "--out",
        str(path),
        "--quiet",
    ]
    assert transfer.main(argv) == 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    sessions = {s["session"]["session_id"]: s["session"] for s in lines if "session" in s}
    memories = {m["memory"]["id"]: m["memory"] for m in lines if "memory" in m}
    profiles = {p["profile"]["actor_id"]: p["profile"] for p in lines if "profile" in p}
    assert lines[-1]["end"]["profiles"] == len(profiles)
    return lines[0], sessions, memories, profiles


def _import(stack: Stack, name: str, path: Path, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("KIVIDB_API_KEY", stack.api_key)
    argv = [
        "import",
        "--url",
        stack.url,
        "--instance",
        "local",
        "--store",
        name,
        "--in",
        str(path),
        "--quiet",
    ]
    status = transfer.main(argv)
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_a_store_moves_to_a_cluster_whole_and_twice_keeps_one_copy(
    stack, cluster_stack, tmp_path, monkeypatch, capsys
):
    name = unique("move")
    with stack.memory() as client:
        _fill(client, name)
        header, sessions, memories, profiles = _export_all(
            stack, name, tmp_path / "store.jsonl.gz", monkeypatch
        )
        source_view = client.get_store("local", name)
        ages = client.store("local", name).profile_history("user-0", "age").versions
        client.delete_store("local", name)
    assert header["settings"]["custom_types"][0]["name"] == "order_issue"
    assert len(sessions) == 13 and len(sessions["long"]["messages"]) == 150
    assert len(memories) == 133
    assert sorted(profiles) == ["user-0", "user-1"]
    status, out = _import(cluster_stack, name, tmp_path / "store.jsonl.gz", monkeypatch, capsys)
    assert status == 0, out
    assert "imported 13 sessions (174 new messages) and 133 memories" in out
    assert "and 2 profiles into" in out
    _, moved_sessions, moved_memories, moved_profiles = _export_all(
        cluster_stack, name, tmp_path / "again.jsonl", monkeypatch
    )
    assert moved_sessions == sessions
    assert moved_memories == memories
    assert moved_profiles == profiles
    status, out = _import(cluster_stack, name, tmp_path / "store.jsonl.gz", monkeypatch, capsys)
    assert status == 0 and "(0 new messages)" in out
    with cluster_stack.memory() as client:
        view = client.get_store("local", name)
        assert view.counts == source_view.counts
        assert view.model_dump(exclude={"instance_id", "created_at", "updated_at", "counts"}) == (
            source_view.model_dump(exclude={"instance_id", "created_at", "updated_at", "counts"})
        )
        store = client.store("local", name)
        assert [m.content for m in store.get_session("long", recent=3).messages] == [
            "m 147",
            "m 148",
            "m 149",
        ]
        found = store.search("Lisbon", mode="keyword", actor_id="user-0").memories
        assert [m.text for m in found] == ["Lives in Lisbon"]
        moved = store.get_profile("user-0").fields
        assert {n: e.value for n, e in moved.items()} == {"city": "Lisbon", "pets": ["Rex"]}
        assert store.profile_history("user-0", "age").versions == ages
        assert store.recall("chat-0", actor_id="user-0").profile == {
            "city": "Lisbon",
            "pets": ["Rex"],
        }
        client.delete_store("local", name)


def test_an_interrupted_import_goes_on_where_it_stopped(
    stack, cluster_stack, tmp_path, monkeypatch, capsys
):
    name = unique("resume")
    path = tmp_path / "resume.jsonl"
    with stack.memory() as client:
        _fill(client, name)
        _, sessions, memories = _export(stack, name, path, monkeypatch)
        client.delete_store("local", name)
    items = len(sessions) + len(memories)
    target = f"{cluster_stack.url} local {name}"
    # as a run that stopped after the first 100 items leaves it: only the rest is sent now
    (tmp_path / "resume.jsonl.progress").write_text(
        json.dumps({"target": target, "lines_done": 100})
    )
    status, out = _import(cluster_stack, name, path, monkeypatch, capsys)
    assert status == 0 and "(resumed after line 100)" in out
    assert not (tmp_path / "resume.jsonl.progress").exists()
    _, partly_sessions, partly_memories = _export(
        cluster_stack, name, tmp_path / "a.jsonl", monkeypatch
    )
    assert len(partly_sessions) + len(partly_memories) == items - 100
    with cluster_stack.memory() as client:
        status, out = _import(cluster_stack, name, path, monkeypatch, capsys)  # from the start
        assert status == 0 and "resumed" not in out
        _, moved_sessions, moved_memories = _export(
            cluster_stack, name, tmp_path / "b.jsonl", monkeypatch
        )
        assert (moved_sessions, moved_memories) == (sessions, memories)
        client.delete_store("local", name)


class _Writers:
    """Threads that write to a store while it is exported: one appends to its sessions, one
    supersedes the current version of its facts (and adds a memory now and then)."""

    def __init__(self, stack: Stack, name: str, sessions: list[str], facts: dict[str, str]):
        self.stack, self.name = stack, name
        self.sessions, self.facts = sessions, facts
        self.stop = threading.Event()
        self.writes = 0
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._run, args=(job,), daemon=True)
            for job in (self._append, self._supersede)
        ]

    def __enter__(self) -> _Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _run(self, job) -> None:
        rng = random.Random(7)
        try:
            with self.stack.memory() as client:
                store = client.store("local", self.name)
                while not self.stop.is_set():
                    job(store, rng)
                    self.writes += 1
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            self.errors.append(exc)

    def _append(self, store, rng: random.Random) -> None:
        session = rng.choice(self.sessions)
        store.add_events(
            session,
            [
                {"role": "user", "content": f"more {self.writes}"},
                {"role": "assistant", "content": "ok"},
            ],
        )

    def _supersede(self, store, rng: random.Random) -> None:
        fact = rng.choice(sorted(self.facts))
        text, last = f"{fact} version {self.writes}", self.facts[fact]
        kept = store.add_memory(text, "user-0", vector=_vector(self.writes), supersedes=last)
        self.facts[fact] = kept.id
        if rng.random() < 0.2:
            store.add_memory(f"plain {self.writes}", "user-1", vector=_vector(self.writes + 1))


def test_a_store_exported_while_written_to_imports_whole(
    stack, cluster_stack, tmp_path, monkeypatch, capsys
):
    """The bug: an export of a store being written said it succeeded, yet held a session whose
    messages ran past its message_count (its import: 422, nothing imported) and memories
    closed by a successor missing from the file (no current version in the copy). Now every
    session is one moment's and every chain whole: the file checks, imports, and its copy has
    one current version of each fact."""
    name = unique("busy")
    sessions = [f"chat-{i}" for i in range(6)]
    facts: dict[str, str] = {}
    with stack.memory() as client:
        client.put_store("local", name, dimensions=DIM, dedupe_threshold=1.0)
        store = client.store("local", name)
        for session in sessions:
            store.add_events(
                session,
                [{"role": "user", "content": f"m {n}"} for n in range(40)],
                actor_id="user-0",
            )
        for i in range(5):
            facts[f"fact {i}"] = store.add_memory(
                f"fact {i} version 0", "user-0", vector=_vector(i)
            ).id
        for i in range(40):
            store.add_memory(f"filler {i}", f"user-{i % 4 + 1}", vector=_vector(50 + i))
    # small pages, so that the export takes many calls and the writers come between them
    monkeypatch.setattr(transfer_export, "SESSION_PAGE", 5)
    monkeypatch.setattr(transfer_export, "MEMORY_PAGE", 3)
    monkeypatch.setattr(transfer_export, "ID_PAGE", 2)
    path = tmp_path / "busy.jsonl"
    with _Writers(stack, name, sessions, facts) as writers:
        _, exported_sessions, exported_memories = _export(stack, name, path, monkeypatch)
    assert not writers.errors, writers.errors
    assert writers.writes > 20, "the writers wrote while the store was exported"
    for session in exported_sessions.values():
        seqs = [m["seq"] for m in session["messages"]]
        assert seqs == list(range(session["folded_seq"] + 1, session["message_count"] + 1))
    status, out = _import(cluster_stack, name, path, monkeypatch, capsys)
    assert status == 0, out
    assert transfer_file.check_export(path) == []
    _, moved_sessions, moved_memories = _export(
        cluster_stack, name, tmp_path / "moved.jsonl", monkeypatch
    )
    assert moved_sessions == exported_sessions
    assert moved_memories == exported_memories
    with cluster_stack.memory() as client:
        store = client.store("local", name)
        current = [
            m
            for m in store.list_memories(limit=100, actor_id="user-0").memories
            if m.text.startswith("fact")
        ]
        assert sorted(m.text.partition(" version")[0] for m in current) == sorted(facts)
        for memory in current:
            chain = store.get_memory(memory.id).chain
            assert [link.id for link in chain][-1] == memory.id
            assert all(link.valid_until for link in chain[:-1]) and not chain[-1].valid_until
        client.delete_store("local", name)
    with stack.memory() as client:
        client.delete_store("local", name)


def test_export_pages_fit_the_answer_budget_and_the_store_still_moves_whole(
    stack, cluster_stack, tmp_path, monkeypatch, capsys
):
    """The cluster's stack answers within 1 MiB as Lambda carries an answer: a session's
    pages and the memory pages are cut by bytes (each at least one item), and the tool moves
    the store by them, whole."""
    name = unique("budget")
    texts = ['"' * 30_000 + f" {n}" for n in range(20)]  # 120 KB each as carried
    with cluster_stack.memory() as client:
        client.put_store("local", name, dimensions=DIM, dedupe_threshold=1.0)
        store = client.store("local", name)
        for start in range(0, len(texts), 5):  # a body of at most 1 MiB
            events = [{"role": "user", "content": t} for t in texts[start : start + 5]]
            store.add_events("big", events, actor_id="ann")
        for n in range(40):
            store.add_memory('"' * 7000 + f" fact {n}", "ann", vector=_vector(n))
    path = f"/instances/local/agent-memory/{name}"
    with cluster_stack.client() as http:
        after, pages = 0, 0
        while after is not None:
            answer = http.get(f"{path}/export/sessions/big", params={"after_seq": after})
            assert answer.status_code == 200
            assert len(json.dumps(answer.text, ensure_ascii=False).encode()) <= CLUSTER_BUDGET
            after, pages = answer.json()["next_after_seq"], pages + 1
        assert pages >= 3
        cursor, pages, seen = None, 0, set()
        while True:
            answer = http.get(
                f"{path}/export/memories", params={"cursor": cursor} if cursor else {}
            )
            assert answer.status_code == 200
            assert len(json.dumps(answer.text, ensure_ascii=False).encode()) <= CLUSTER_BUDGET
            seen |= {m["id"] for m in answer.json()["memories"]}
            cursor, pages = answer.json()["next_cursor"], pages + 1
            if cursor is None:
                break
        assert len(seen) == 40 and pages >= 2
    _, sessions, memories = _export(cluster_stack, name, tmp_path / "big.jsonl", monkeypatch)
    assert [m["content"] for m in sessions["big"]["messages"]] == texts
    assert len(memories) == 40
    with cluster_stack.memory() as client:
        client.delete_store("local", name)
    status, out = _import(cluster_stack, name, tmp_path / "big.jsonl", monkeypatch, capsys)
    assert status == 0, out
    _, moved_sessions, moved_memories = _export(
        cluster_stack, name, tmp_path / "again.jsonl", monkeypatch
    )
    assert (moved_sessions, moved_memories) == (sessions, memories)
    with cluster_stack.memory() as client:
        client.delete_store("local", name)


def test_a_cut_or_foreign_file_is_refused_and_nothing_is_created(
    cluster_stack, tmp_path, monkeypatch, capsys
):
    name = unique("cut")
    cut = tmp_path / "cut.jsonl"
    cut.write_text(
        json.dumps({"format": transfer_file.FORMAT, "version": 1, "settings": {}})
        + "\n"
        + json.dumps({"memory": {}})
        + "\n"
    )
    status, out = _import(cluster_stack, name, cut, monkeypatch, capsys)
    assert status == 1 and "has no end line: the export did not finish" in out
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n{"end": {}}\n')
    status, out = _import(cluster_stack, name, other, monkeypatch, capsys)
    assert status == 1 and "is not an export of kividb-agent-memory-export" in out
    # a gzip export cut short in the middle of its stream, and a file that only says .gz
    whole = gzip.compress(
        ("\n".join(json.dumps({"memory": {"n": i}}) for i in range(3000))).encode()
    )
    short = tmp_path / "short.jsonl.gz"
    short.write_bytes(whole[: len(whole) // 2])
    status, out = _import(cluster_stack, name, short, monkeypatch, capsys)
    assert status == 1 and "cannot be read whole" in out and "Traceback" not in out
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text("not gzip\n")
    status, out = _import(cluster_stack, name, fake, monkeypatch, capsys)
    assert status == 1 and "cannot be read whole" in out
    # an export that is not whole: a session's messages past its message_count, a memory
    # closed by one the file lacks (what the tool wrote before under writes)
    day = "2026-01-01T00:00:00Z"
    broken = tmp_path / "broken.jsonl"
    session = {
        "session_id": "s",
        "message_count": 1,
        "read_seq": 0,
        "folded_seq": 0,
        "created_at": day,
        "last_event_at": day,
        "expires_at": "2099-01-01T00:00:00Z",
        "messages": [{"seq": n, "role": "user", "content": "x", "created_at": day} for n in (1, 2)],
    }
    memory = {
        "id": "mem_0123456789abcdef0123",
        "actor_id": "a",
        "valid_from": day,
        "supersedes": None,
        "superseded_by": "mem_0123456789abcdef0124",
        "valid_until": day,
        "updated_at": day,
        "created_at": day,
    }
    broken.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {"format": transfer_file.FORMAT, "version": 1, "settings": {}},
                {"session": session},
                {"memory": memory},
                {"end": {"sessions": 1, "memories": 1}},
            )
        )
        + "\n"
    )
    status, out = _import(cluster_stack, name, broken, monkeypatch, capsys)
    assert status == 1 and "is not whole, so nothing was imported" in out
    assert "session s: its messages run from 1 to 2, outside folded_seq + 1 to message_count" in out
    assert "memory mem_0123456789abcdef0123 was replaced by mem_0123456789abcdef0124" in out
    with cluster_stack.client() as http:
        assert http.get(f"/instances/local/agent-memory/{name}").status_code == 404


def test_an_export_that_is_not_whole_is_not_called_done(stack, tmp_path, monkeypatch, capsys):
    """The tool reads its own file back before it says it succeeded: a session assembled past
    its message_count (as the tool did before) fails the export, and the file keeps its
    .partial name."""
    name = unique("notwhole")
    with stack.memory() as client:
        client.put_store("local", name, dimensions=DIM)
        client.store("local", name).add_events(
            "s", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        )
        monkeypatch.setattr(
            transfer_export,
            "_one_moment",
            lambda pages: {
                **{k: v for k, v in pages[0].items() if k != "next_after_seq"},
                "message_count": 1,
            },
        )
        monkeypatch.setenv("KIVIDB_API_KEY", stack.api_key)
        out = tmp_path / "s.jsonl"
        argv = [
            "export",
            "--url",
            stack.url,
            "--instance",
            "local",
            "--store",
            name,
            "--out",
            str(out),
            "--quiet",
        ]
        assert transfer.main(argv) == 1
        err = capsys.readouterr().err
        assert "the export is not whole, so it was left as" in err
        assert "session s: its messages run from 1 to 2" in err
        assert not out.exists() and (tmp_path / "s.jsonl.partial").exists()
        client.delete_store("local", name)


def test_the_import_routes_refuse_bad_input_exactly_and_keep_nothing(api: httpx.Client):
    name = unique("refuse")
    store = f"/instances/local/agent-memory/{name}"
    assert api.put(store, json={"dimensions": DIM}).status_code == 201
    now = "2026-01-01T00:00:00Z"
    soon = (datetime.now(UTC) + timedelta(days=30)).isoformat()  # within every TTL
    memory = {
        "id": "mem_0123456789abcdef0123",
        "text": "t",
        "created_at": now,
        "updated_at": now,
        "expires_at": soon,
        "vector": base64.b64encode(np.ones(3, "<f4").tobytes()).decode(),
    }
    answer = api.post(f"{store}/import/memories", json={"memories": [memory]})
    assert answer.status_code == 422
    assert answer.json() == {
        "error": "validation_error",
        "message": "Some memories are not valid; see details.",
        "details": [{"field": "memories.0.vector", "problem": "expected 4 dimensions, got 3"}],
    }
    answer = api.post(f"{store}/import/memories", json={"memories": [{**memory, "extra": 1}]})
    assert answer.status_code == 422
    assert {"field": "memories.0.extra", "problem": "Extra inputs are not permitted"} in (
        answer.json()["details"]
    )
    message = {"seq": 3, "role": "user", "content": "x", "created_at": now}
    session = {
        "message_count": 2,
        "created_at": now,
        "last_event_at": now,
        "expires_at": soon,
        "messages": [message],
    }
    answer = api.put(f"{store}/import/sessions/s1", json=session)
    assert answer.status_code == 422
    assert answer.json()["details"] == [
        {
            "field": "messages.0.seq",
            "problem": "must lie from folded_seq + 1 to message_count (1 to 2)",
        }
    ]
    pending = json.dumps({"from": 1, "to": 10**15, "memories": []})
    answer = api.put(
        f"{store}/import/sessions/s1", json={**session, "messages": [], "pending": pending}
    )
    assert answer.status_code == 422
    assert answer.json()["details"] == [
        {"field": "pending", "problem": "to must lie from 1 (from) to 2 (message_count)"}
    ]
    answer = api.put(f"{store}/import/sessions/s1", json={**session, "messages": [], "read_seq": 3})
    assert answer.json()["details"] == [
        {"field": "read_seq", "problem": "must be at most message_count (2)"}
    ]
    other = "mem_0123456789abcdef0124"
    cycle = [
        {
            **memory,
            "vector": base64.b64encode(np.ones(DIM, "<f4").tobytes()).decode(),
            "id": one,
            "supersedes": two,
            "superseded_by": two,
            "valid_until": now,
        }
        for one, two in ((memory["id"], other), (other, memory["id"]))
    ]
    answer = api.post(f"{store}/import/memories", json={"memories": cycle})
    assert answer.status_code == 422
    assert [d["field"] for d in answer.json()["details"]] == [
        "memories.0.superseded_by",
        "memories.1.superseded_by",
    ]
    answer = api.post(f"{store}/import/memories", json={"memories": cycle[:1]})
    assert answer.status_code == 422
    assert answer.json()["details"][0]["field"] == "memories.0.superseded_by"
    assert api.get(f"{store}/export/sessions/s1").status_code == 404
    page = api.get(f"{store}/export/memories").json()
    assert (page["memories"], page["next_cursor"]) == ([], None) and page["read_at"]
    assert api.get(f"{store}/export/memories", params={"cursor": "x"}).status_code == 422
    assert api.get(f"{store}/export/sessions", params={"cursor": "-1"}).status_code == 422
    view = api.get(store).json()
    assert view["counts"] == {"sessions": 0, "memories": 0, "waiting_for_extraction": 0}
    missing = f"/instances/local/agent-memory/{unique('none')}"
    assert api.get(f"{missing}/export/memories").json()["error"] == "store_not_found"
    assert api.delete(store).status_code == 204


def test_ctrl_c_ends_the_tool_with_one_line_saying_what_to_do(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setenv("KIVIDB_API_KEY", "kvm_not_used_0123456789abcdefghijklmnop")
    monkeypatch.setattr(transfer, "import_store", interrupted)
    monkeypatch.setattr(transfer, "export_store", interrupted)
    base = ["--url", "http://127.0.0.1:9", "--instance", "local", "--store", "s"]
    assert transfer.main(["import", *base, "--in", str(tmp_path / "x.jsonl")]) == 130
    assert capsys.readouterr().err.strip() == (
        "transfer: interrupted: run the same command again to go on where it stopped"
    )
    assert transfer.main(["export", *base, "--out", str(tmp_path / "x.jsonl")]) == 130
    err = capsys.readouterr().err.strip()
    assert (
        err == f"transfer: interrupted: nothing was written to {tmp_path / 'x.jsonl'}; run it again"
    )


def test_a_profile_larger_than_a_batch_moves_whole_in_pieces(stack, tmp_path, monkeypatch, capsys):
    """A profile whose JSON passes the import's batch size goes as one piece a field, and the
    pieces make the whole profile again, history and all (the batch size lowered here so a
    profile of a few kilobytes passes it; a real one passes 700 kB at the fields' limits)."""
    name, moved = unique("bigprofile"), unique("bigprofile-moved")
    monkeypatch.setattr(transfer_import, "MEMORY_BATCH_BYTES", 6_000)
    sent: list[list[str]] = []
    real = StoreClient.import_profiles

    def noted(self, profiles, **kwargs):
        sent.append([sorted({*p["fields"], *p["history"]}) for p in profiles])
        return real(self, profiles, **kwargs)

    monkeypatch.setattr(StoreClient, "import_profiles", noted)
    with stack.memory() as client:
        client.put_store("local", name, dimensions=DIM, profile_fields=PROFILE_FIELDS)
        store = client.store("local", name)
        for version in range(6):
            store.update_profile(
                "big",
                {
                    "city": f"{version} " + "x" * 900,
                    "pets": [f"{version}-{n}" * 20 for n in range(5)],
                },
            )
        store.update_profile("small", {"age": 3})
        _, _, _, profiles = _export_all(stack, name, tmp_path / "big.jsonl", monkeypatch)
        assert len(json.dumps(profiles["big"])) > 6_000
        status, out = _import(stack, moved, tmp_path / "big.jsonl", monkeypatch, capsys)
        assert status == 0, out
        assert "and 2 profiles into" in out
        pieces = [piece for batch in sent for piece in batch]
        assert ["city"] in pieces and ["pets"] in pieces  # "big" went a field at a time
        assert ["age"] in pieces  # "small" went whole
        _, _, _, again = _export_all(stack, moved, tmp_path / "again.jsonl", monkeypatch)
        assert again == profiles
        for made in (name, moved):
            client.delete_store("local", made)


NOT_SCAN_CURSORS = [
    "18446744073709551616",  # 2**64: the first number Redis refuses as a cursor
    "29336603779746564944",  # the fuzzer's: 20 digits, above 2**64 (a 500 before)
    "99999999999999999999",
    "²",  # str.isdigit says yes, int says no
    "١٢",  # Arabic-Indic digits: int reads them, Redis does not
]


@pytest.mark.parametrize("cursor", NOT_SCAN_CURSORS)
def test_an_export_cursor_that_no_scan_could_give_is_a_422_in_words(
    api: httpx.Client, store: str, cursor: str
):
    """Every export route whose cursor carries a SCAN cursor (sessions; memories, in each half
    of its cursor; profiles) refuses one that Redis cannot take, before any read."""
    message = {"role": "user", "content": "hello"}
    assert api.post(f"{store}/sessions/s1/events", json={"events": [message]}).status_code < 300
    cases = {
        "export/sessions": cursor,
        "export/memories": f"{cursor}:b",
        "export/profiles": cursor,
    }
    cases["export/memories#resume"] = f"0.{cursor}.mem_{'0' * 20}:b"
    for route, value in cases.items():
        answer = api.get(f"{store}/{route.split('#')[0]}", params={"cursor": value})
        assert answer.status_code == 422, (route, answer.text)
        body = answer.json()
        fields = [detail["field"] for detail in body.get("details", [])]
        assert body["error"] == "validation_error", body
        assert fields and all(field.endswith("cursor") for field in fields), body
    assert api.get(f"{store}/export/sessions").json()["session_ids"] == ["s1"]
