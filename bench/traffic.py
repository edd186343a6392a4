"""Mixed agent traffic against a store, a record of every write, and the exactly-once check.

Shared by the fault run (``bench/faults.py``), the load run (``bench/load.py`` through
``bench/locustfile.py``) and their fast versions in ``tests/e2e``. It imports the standard
library, httpx and the Python client (httpx and pydantic), so locust's process (gevent) can use
it unchanged.

An ``Agent`` is one simulated agent: its own actor, one session at a time (a new one every
``turns_per_session`` appends), and a weighted mix of calls: append a turn (2 messages), recall,
search, add a memory, read the session, and, when it moves to a new session of a store with a
language model, ``POST .../extract`` of the finished one. It never retries: a call that gets no
2xx answer is recorded as not acknowledged and dropped, so a message or memory stored twice can
only come from the server. Every text carries a token of letters of its own (no digits, so
redaction leaves it alone), which makes each message and memory unique.

``check_exactly_once`` reads every session and every actor's memories back after the traffic
stopped, through the Python client (``kividb_memory``), and counts what was lost, duplicated,
reordered or never sent (:class:`Check`).

The agents' calls stay on raw httpx (``httpx_transport``) and do not use the client: a
``Transport`` is the seam locust's ``HttpUser`` fills too (bench/locustfile.py), and it records
each answer's own status and ``Retry-After`` header as sent and times the HTTP exchange alone,
where the client returns models without the status of a success, parses ``Retry-After`` to
seconds (``None`` for one it cannot read) and validates both ends inside the timed call.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import httpx

from kividb_memory import MemoryClient, MemoryView, NotFoundError, StoreClient

CLIENT_TIMEOUT = 30.0
"""Seconds a client waits for an answer: API Gateway HTTP API's maximum integration timeout
(https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html), the
longest any caller of the deployed API can wait."""
FUNCTION_TIMEOUT = 10.0
"""Seconds a route function may run in AWS (``template.yaml``; docs/limits.md): an answer that
takes longer through the local stack, which does not stop a function, would have been API
Gateway's own 500 there."""

Route = Literal[
    "POST events", "POST recall", "POST search", "POST memories", "GET session", "POST extract"
]
WEIGHTS: dict[Route, int] = {
    "POST events": 5,
    "POST recall": 3,
    "POST search": 2,
    "POST memories": 1,
    "GET session": 1,
}
"""The mix: relative weights of each call (``POST extract`` comes on top, once per session of
a store with a language model)."""
WORDS = [
    "deploy",
    "cache",
    "billing",
    "replica",
    "region",
    "quota",
    "ticket",
    "invoice",
    "rollout",
    "schema",
    "backup",
    "latency",
    "budget",
    "roadmap",
    "release",
    "migration",
    "alert",
    "dashboard",
    "contract",
    "vendor",
]


@dataclass(frozen=True)
class Reply:
    """What a transport got: ``status`` (None when no answer came: timeout or connection
    error, named in ``error``), the JSON ``body`` (None when not JSON) and ``Retry-After``."""

    status: int | None
    body: Any = None
    retry_after: str | None = None
    error: str | None = None

    @property
    def code(self) -> str | None:
        """The error code of an error answer in our shape (``{"error": "<code>", ...}``)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), str):
            return str(self.body["error"])
        return None


class Transport(Protocol):
    """Sends one call: ``(method, path, JSON body or None, route name) -> Reply``."""

    def __call__(
        self, method: str, path: str, body: dict[str, Any] | None, route: Route
    ) -> Reply: ...


@dataclass(frozen=True)
class Answer:
    """One call as the client saw it: ``route``, ``agent``, ``start`` and ``end``
    (``time.monotonic()`` seconds), and the ``Reply``'s ``status``, ``retry_after``, ``error``
    and error ``code``."""

    route: str
    agent: str
    start: float
    end: float
    status: int | None
    retry_after: str | None
    error: str | None
    code: str | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def ok(self) -> bool:
        return acknowledged(self.status)


def acknowledged(status: int | None) -> bool:
    """A 2xx answer: the write was acknowledged."""
    return status is not None and 200 <= status < 300


@dataclass
class Append:
    """One ``POST .../events`` of two messages, and its answer's status (None: no answer)."""

    session_id: str
    actor_id: str
    contents: list[str]
    status: int | None


@dataclass
class MemoryAdd:
    """One ``POST .../memories``: its text and token, the answer's status, and the id and
    ``duplicate`` flag of a 2xx answer."""

    actor_id: str
    text: str
    token: str
    status: int | None
    memory_id: str | None = None
    duplicate: bool | None = None


@dataclass
class Ledger:
    """Everything the agents sent and how it was answered (JSON-serializable with ``dump``)."""

    store: str
    appends: list[Append] = field(default_factory=list)
    adds: list[MemoryAdd] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)

    def dump(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, data: dict[str, Any]) -> Ledger:
        return cls(
            data["store"],
            [Append(**a) for a in data["appends"]],
            [MemoryAdd(**m) for m in data["adds"]],
            [Answer(**a) for a in data["answers"]],
            list(data["sessions"]),
        )

    def extend(self, other: Ledger) -> None:
        self.appends += other.appends
        self.adds += other.adds
        self.answers += other.answers
        self.sessions += other.sessions


def token() -> str:
    """A unique word of 16 letters (g to v, from 64 random bits)."""
    return "".join(chr(ord("g") + int(d, 16)) for d in uuid.uuid4().hex[:16])


class Agent:
    """One simulated agent on ``store`` (a path ``/instances/.../agent-memory/<name>``).

    ``dimensions``: the store takes client vectors of that length (its ``embed_provider`` is
    ``none``); None: the store embeds texts itself. ``extract``: the store has a language model,
    so each finished session gets a ``POST .../extract``. ``step()`` makes one weighted call and
    records it in ``ledger``; it raises nothing for an error answer.
    """

    def __init__(
        self,
        send: Transport,
        store: str,
        name: str,
        *,
        dimensions: int | None,
        extract: bool,
        turns_per_session: int = 15,
        seed: int | None = None,
    ) -> None:
        self.send = send
        self.store = store
        self.name = name
        self.actor_id = f"{name}-actor"
        self.dimensions = dimensions
        self.extract = extract
        self.turns_per_session = turns_per_session
        self.rng = random.Random(seed)
        self.ledger = Ledger(store)
        self.session_number = 0
        self.turns = 0
        self.stored = False  # the current session holds an acknowledged message
        self.last_token = token()
        self.session_id = self._new_session()
        self._routes = list(WEIGHTS)
        self._weights = [WEIGHTS[r] for r in self._routes]
        self._calls: dict[Route, Callable[[], None]] = {
            "POST events": self.append,
            "POST recall": self.recall,
            "POST search": self.search,
            "POST memories": self.add_memory,
            "GET session": self.read_session,
        }

    def _new_session(self) -> str:
        self.session_number += 1
        session_id = f"{self.name}-s{self.session_number}"
        self.ledger.sessions.append(session_id)
        return session_id

    def _vector(self) -> list[float]:
        assert self.dimensions is not None
        return [self.rng.gauss(0.0, 1.0) for _ in range(self.dimensions)]

    def call(self, method: str, path: str, body: dict[str, Any] | None, route: Route) -> Reply:
        """Send one call and record its ``Answer``."""
        start = time.monotonic()
        reply = self.send(method, self.store + path, body, route)
        self.ledger.answers.append(
            Answer(
                route,
                self.name,
                start,
                time.monotonic(),
                reply.status,
                reply.retry_after,
                reply.error,
                reply.code,
            )
        )
        return reply

    def step(self) -> None:
        """One call, chosen by ``WEIGHTS``."""
        route = self.rng.choices(self._routes, self._weights)[0]
        self._calls[route]()

    def append(self) -> None:
        """Append a turn (a user and an assistant message) to the current session."""
        word = self.rng.choice(WORDS)
        tok = self.last_token = token()
        contents = [
            # No word of the scripted model's subject groups (tools/scripted_model.py), so
            # that its extracted memories never replace one another.
            f"I wrote down {tok} while planning the {word} changes.",
            f"Noted {tok} for the {word} changes.",
        ]
        events = [
            {"role": "user", "content": contents[0]},
            {"role": "assistant", "content": contents[1]},
        ]
        sent = Append(self.session_id, self.actor_id, contents, None)
        self.ledger.appends.append(sent)  # before sending: a call cut off midway is in the ledger
        reply = self.call(
            "POST",
            f"/sessions/{self.session_id}/events",
            {"actor_id": self.actor_id, "events": events},
            "POST events",
        )
        sent.status = reply.status
        self.stored = self.stored or acknowledged(reply.status)
        self.turns += 1
        if self.turns >= self.turns_per_session:
            finished, stored = self.session_id, self.stored
            self.session_id, self.turns, self.stored = self._new_session(), 0, False
            if self.extract and stored:
                self.call("POST", f"/sessions/{finished}/extract", None, "POST extract")

    def finish(self) -> None:
        """``POST .../extract`` of the current session, when the store has a language model
        and the session holds an acknowledged message (so nothing waits the extraction delay)."""
        if self.extract and self.stored:
            self.call("POST", f"/sessions/{self.session_id}/extract", None, "POST extract")

    def recall(self) -> None:
        """Recall for the current session, with a query naming the last token."""
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "actor_id": self.actor_id,
            "query": f"{self.rng.choice(WORDS)} {self.last_token}",
            "limit": 5,
        }
        if self.dimensions is not None:
            body["query_vector"] = self._vector()
        self.call("POST", "/recall", body, "POST recall")

    def search(self) -> None:
        """Search the actor's memories: keyword, semantic or hybrid in turn."""
        mode = self.rng.choice(["keyword", "semantic", "hybrid"])
        body: dict[str, Any] = {
            "query": f"{self.rng.choice(WORDS)} team {self.last_token}",
            "mode": mode,
            "actor_id": self.actor_id,
            "limit": 5,
        }
        if self.dimensions is not None and mode != "keyword":
            body["query_vector"] = self._vector()
        self.call("POST", "/memories/search", body, "POST search")

    def add_memory(self) -> None:
        """Add a memory with a unique text."""
        tok = token()
        a, b, c = self.rng.sample(WORDS, 3)
        text = f"Fact {tok}: the {a} team wants {b} reviewed before {c}."
        body: dict[str, Any] = {"text": text, "actor_id": self.actor_id, "topics": [a]}
        if self.dimensions is not None:
            body["vector"] = self._vector()
        add = MemoryAdd(self.actor_id, text, tok, None)
        self.ledger.adds.append(add)
        reply = self.call("POST", "/memories", body, "POST memories")
        add.status = reply.status
        if acknowledged(reply.status) and isinstance(reply.body, dict):
            add.memory_id = reply.body.get("id")
            add.duplicate = reply.body.get("duplicate")

    def read_session(self) -> None:
        """Read the current session's newest 20 messages (append instead while the session
        has no acknowledged message, so that the read is not a 404)."""
        if not self.stored:
            self.append()
            return
        self.call("GET", f"/sessions/{self.session_id}?recent=20", None, "GET session")


def httpx_transport(http: httpx.Client) -> Transport:
    """A ``Transport`` over one httpx client (its own timeout and connection pool)."""

    def send(method: str, path: str, body: dict[str, Any] | None, route: Route) -> Reply:
        try:
            answer = http.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            return Reply(None, error=f"no answer ({type(exc).__name__})")
        except httpx.TransportError as exc:
            return Reply(None, error=f"connection failed ({type(exc).__name__})")
        try:
            data = answer.json() if answer.content else None
        except ValueError:
            data = None
        return Reply(answer.status_code, data, answer.headers.get("retry-after"))

    return send


# ------------------------------------------------------------------------------------------
# The exactly-once check
# ------------------------------------------------------------------------------------------


@dataclass
class Check:
    """What reading everything back found. Must be 0: every ``*_lost``, ``*_duplicated``,
    ``messages_unknown``, ``sessions_out_of_order``, ``count_mismatches``,
    ``memories_wrong_text`` and ``memories_unlisted`` (kept, found by id, missing from the
    listing). Allowed, and reported: ``*_kept_unacknowledged`` (a write that got
    no 2xx answer but was stored, once) and ``memories_found_not_listed`` (an unacknowledged
    add that search finds but the listing does not show: docs/design.md, "Noticed")."""

    messages_acknowledged: int = 0
    messages_lost: int = 0
    messages_duplicated: int = 0
    messages_unknown: int = 0
    messages_kept_unacknowledged: int = 0
    sessions_out_of_order: int = 0
    count_mismatches: int = 0
    memories_acknowledged: int = 0
    memories_lost: int = 0
    memories_duplicated: int = 0
    memories_wrong_text: int = 0
    memories_unlisted: int = 0
    memories_kept_unacknowledged: int = 0
    memories_found_not_listed: int = 0
    extracted: int = 0
    extracted_duplicated: int = 0
    problems: list[str] = field(default_factory=list)

    MUST_BE_ZERO = (
        "messages_lost",
        "messages_duplicated",
        "messages_unknown",
        "sessions_out_of_order",
        "count_mismatches",
        "memories_lost",
        "memories_duplicated",
        "memories_wrong_text",
        "memories_unlisted",
        "extracted_duplicated",
    )

    @property
    def failures(self) -> int:
        """The sum of the counts that must be 0."""
        return sum(int(getattr(self, name)) for name in self.MUST_BE_ZERO)

    def add(self, other: Check) -> None:
        for name, value in asdict(other).items():
            if name == "problems":
                self.problems += value
            else:
                setattr(self, name, getattr(self, name) + value)


def store_client(client: MemoryClient, path: str) -> StoreClient:
    """The handle on the store of ``path`` (``/instances/<instance>/agent-memory/<name>``, as
    ``Agent`` and ``Ledger`` name it); ``ValueError`` for another path."""
    parts = path.strip("/").split("/")
    if len(parts) != 4 or parts[0] != "instances" or parts[2] != "agent-memory":
        raise ValueError(f"not a store's path: {path!r}")
    return client.store(parts[1], parts[3])


def check_exactly_once(client: MemoryClient, ledger: Ledger) -> Check:
    """Read back every session and every actor's memories of ``ledger.store`` with ``client``
    and compare with what was sent. Run it once the traffic has stopped and the stack answers
    again; the client's retries (``max_retries``) are the caller's choice. Raises the client's
    ``kividb_memory.ServerError`` when a read answers 5xx (the check itself could not run)."""
    check = Check()
    store = store_client(client, ledger.store)
    by_session: dict[str, list[Append]] = {}
    for item in ledger.appends:
        by_session.setdefault(item.session_id, []).append(item)
    for session_id, items in by_session.items():
        _check_session(check, store, session_id, items)
    actors = sorted({a.actor_id for a in ledger.appends} | {m.actor_id for m in ledger.adds})
    for actor in actors:
        _check_actor(check, store, actor, [m for m in ledger.adds if m.actor_id == actor])
    return check


def _check_session(check: Check, store: StoreClient, session_id: str, items: list[Append]) -> None:
    """Count into ``check`` what one session keeps against the appends sent to it."""
    stored: list[str] = []
    count = 0
    try:
        view = store.get_session(session_id, recent=1000)
    except NotFoundError:
        pass
    else:
        stored = [m.content for m in view.messages]
        count = view.message_count
    sent = [c for item in items for c in item.contents]
    acked = {c for item in items if acknowledged(item.status) for c in item.contents}
    check.messages_acknowledged += len(acked)
    counts = Counter(stored)
    lost = [c for c in acked if counts[c] == 0]
    check.messages_lost += len(lost)
    check.messages_duplicated += sum(n - 1 for n in counts.values() if n > 1)
    known = set(sent)
    check.messages_unknown += sum(1 for c in counts if c not in known)
    check.messages_kept_unacknowledged += sum(1 for c in known - acked if counts[c] > 0)
    if [c for c in dict.fromkeys(stored) if c in known] != [c for c in sent if c in counts]:
        check.sessions_out_of_order += 1
        check.problems.append(f"session {session_id}: messages out of order")
    if count != len(stored):
        check.count_mismatches += 1
        check.problems.append(f"session {session_id}: message_count {count}, {len(stored)} kept")
    if lost:
        check.problems.append(f"session {session_id}: lost {lost[:3]}")


def _check_actor(check: Check, store: StoreClient, actor: str, adds: list[MemoryAdd]) -> None:
    """Count into ``check`` what one actor keeps against the memories added for it."""
    listed = list_memories(store, actor)
    by_id = {m.id: m for m in listed}
    texts = Counter(m.text for m in listed)
    check.memories_duplicated += sum(n - 1 for n in texts.values() if n > 1)
    extracted = [m.text for m in listed if m.source]
    check.extracted += len(extracted)
    check.extracted_duplicated += sum(n - 1 for n in Counter(extracted).values() if n > 1)
    for add in adds:
        if acknowledged(add.status):
            check.memories_acknowledged += 1
            _check_acknowledged_add(check, store, add, by_id.get(add.memory_id or ""))
        elif texts[add.text] > 0:
            check.memories_kept_unacknowledged += 1
        elif _found_by_search(store, add):
            check.memories_found_not_listed += 1


def _check_acknowledged_add(
    check: Check, store: StoreClient, add: MemoryAdd, kept: MemoryView | None
) -> None:
    """Count into ``check`` whether an acknowledged add is kept (``kept``: the memory the
    listing has under its id), lost, or kept but not listed."""
    if kept is None and add.memory_id:  # not listed: ask for it by id
        try:
            kept = store.get_memory(add.memory_id)
        except NotFoundError:
            kept = None
        if kept is not None:
            check.memories_unlisted += 1
            check.problems.append(f"memory {add.memory_id} kept but not listed")
    if kept is None:
        check.memories_lost += 1
        check.problems.append(f"memory {add.memory_id} ({add.token}) lost")
    elif not add.duplicate and kept.text != add.text:
        check.memories_wrong_text += 1


def list_memories(store: StoreClient, actor_id: str) -> list[MemoryView]:
    """Every memory of ``actor_id`` in ``store``, following ``next_offset``, each id once.

    The listing is newest first, so a memory kept while it is read (background extraction
    goes on after the traffic stopped) pushes the older ones one place down and the next page
    shows again the last one of the page before: the same id twice, not two memories. Nothing
    is skipped that way (nothing is deleted here)."""
    found: dict[str, MemoryView] = {}
    offset: int | None = 0
    while offset is not None:
        page = store.list_memories(offset=offset, limit=100, actor_id=actor_id)
        for memory in page.memories:
            found.setdefault(memory.id, memory)
        offset = page.next_offset
    return list(found.values())


def _found_by_search(store: StoreClient, add: MemoryAdd) -> bool:
    found = store.search(add.token, mode="keyword", actor_id=add.actor_id, limit=5)
    return any(m.text == add.text for m in found.memories)


def statuses(answers: Iterable[Answer]) -> Counter[str]:
    """Answers by kind: ``"2xx"``, an error status with its code (``"503
    database_unavailable"``), or, without an answer, the ``error``."""

    def kind(a: Answer) -> str:
        if a.status is None:
            return str(a.error)
        if a.ok:
            return "2xx"
        return f"{a.status} {a.code}" if a.code else str(a.status)

    return Counter(kind(a) for a in answers)
