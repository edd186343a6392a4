"""Replay real multi-session conversations through the running memory API, as an agent would.

Usage (with the local stack running, ``make run``)::

    python -m tools.replay                                  # LoCoMo conv-26, every session
    python -m tools.replay --conversation conv-30 --sessions 5
    python -m tools.replay --dataset memorybank --conversation Linda
    python -m tools.replay --url http://127.0.0.1:3077 --api-key KEY --store replay --quiet

Options: ``--url`` (default ``$KIVIDB_URL``, else http://127.0.0.1:``$PORT`` with 3000 as the
port default, as ``make run`` uses), ``--api-key`` (default
``$KIVIDB_API_KEY``, else the key kept in ``.local/api_key``), ``--instance`` (``local``),
``--store`` (``replay``), ``--dataset`` (``locomo`` or ``memorybank``), ``--file``,
``--conversation`` (a LoCoMo ``sample_id`` or a MemoryBank user name), ``--sessions N`` (only the
first N sessions), ``--fresh`` (delete the replayed sessions first, so a second run does not append
the same messages again), ``--quiet`` (no progress, no recalled context).

Progress (``tools.progress``): on a terminal a bar per session with its messages and a
percentage, elsewhere one line per session as it ends; then the summary.

What it does: ``PUT`` the store (created when missing), then for every session of the
conversation walk its messages like an agent loop. For each user message it first calls
``recall`` with that message as the query (the agent asks for memory before its model call), then
sends the user message and the assistant replies that follow it as one ``events`` call. Messages
before the first user message go in an ``events`` call of their own. At the end it recalls the last
session once more, prints the recalled context, and one summary line with latencies (median and
nearest-rank p99 over every ``events`` and ``recall`` call, the final recall included; the store
``PUT`` and ``--fresh`` deletes are not counted).

Data (see ``../shared/data/*/README.md``): LoCoMo gives one session per ``session_<N>`` and one
actor per conversation, ``speaker_a`` as the user and ``speaker_b`` as the assistant, every message
stamped with its session's date. MemoryBank gives one actor per user and one session per day (empty
days skipped), each exchange as a user and an assistant message stamped with the day at 00:00 UTC.
The loading functions are pure (JSON in, sessions out) so they can be tested without the API.

Exit status: 0 on success; 1 with a one-line message when the API cannot be reached, the key is
rejected, a request fails (the API's ``error`` and ``message`` are shown) or the data is unusable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from kividb_memory import (
    ApiConnectionError,
    AuthenticationError,
    KiviDBError,
    MemoryClient,
    NotFoundError,
    RecallView,
)
from tools.progress import Progress

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "http://127.0.0.1:3000"


def default_url() -> str:
    """Where ``make run`` serves: ``http://127.0.0.1:$PORT`` (3000 when PORT is unset)."""
    port = os.environ.get("PORT")
    return f"http://127.0.0.1:{port}" if port else DEFAULT_URL


DATA_DIR = Path(os.environ.get("KIVIDB_DATA_DIR") or ROOT.parent / "shared" / "data")
"""The datasets' folder: ``KIVIDB_DATA_DIR``, else ``shared/data`` beside the project folder."""
DEFAULT_FILES = {
    "locomo": DATA_DIR / "locomo" / "locomo10.json",
    "memorybank": DATA_DIR / "memorybank" / "en" / "memory_bank_en.json",
}
DEFAULT_CONVERSATIONS = {"locomo": "conv-26", "memorybank": "Emily"}
LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
MEMORYBANK_ASSISTANT = "AI companion"

# Limits of the API (DESIGN section 2 and the request models).
MAX_EVENTS_PER_CALL = 100
MAX_CONTENT_CHARS = 32_000
MAX_QUERY_CHARS = 8_000
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:@\-]+")
_SESSION_KEY = re.compile(r"^session_(\d+)$")

Role = Literal["user", "assistant"]


class ReplayError(Exception):
    """A failure worth one line on stderr: bad data, an unreachable API, a rejected request."""


# --- data: datasets to sessions of messages (pure) ---------------------------------------------


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    name: str
    created_at: str  # ISO 8601, UTC, "Z" suffix

    def event(self) -> dict[str, str]:
        return {
            "role": self.role,
            "content": self.content,
            "name": self.name,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class Session:
    session_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Conversation:
    label: str  # what the summary line calls it: "conv-26", "Emily"
    actor_id: str
    sessions: tuple[Session, ...]

    @property
    def message_count(self) -> int:
        return sum(len(session.messages) for session in self.sessions)


@dataclass(frozen=True)
class Step:
    """One turn of the agent loop: recall with ``query`` (when set), then add ``messages``."""

    query: str | None
    messages: tuple[Message, ...]


def safe_id(text: str) -> str:
    """``text`` in the session/actor id alphabet: each run of other characters becomes ``_``."""
    cleaned = _ID_UNSAFE.sub("_", text.strip())
    if not cleaned:
        raise ReplayError(f"cannot make an id from {text!r}")
    return cleaned[:256]


def iso_utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_locomo_date(text: str) -> str:
    """``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08T13:56:00Z"`` (the data has no zone: UTC)."""
    try:
        moment = datetime.strptime(text.strip(), LOCOMO_DATE_FORMAT)
    except ValueError as exc:
        raise ReplayError(f"unreadable LoCoMo session date {text!r}") from exc
    return iso_utc(moment.replace(tzinfo=UTC))


def locomo_turn_content(turn: dict[str, Any]) -> str:
    """A turn's text, with ``[shared an image: <caption>]`` appended when it carries a caption."""
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shared an image: {caption}]".strip()
    return text[:MAX_CONTENT_CHARS]


def locomo_sample_ids(data: Sequence[dict[str, Any]]) -> list[str]:
    return [str(sample.get("sample_id")) for sample in data]


def load_locomo(data: Sequence[dict[str, Any]], sample_id: str) -> Conversation:
    """One LoCoMo sample as a conversation: a session per ``session_<N>`` that holds turns."""
    sample = next((s for s in data if s.get("sample_id") == sample_id), None)
    if sample is None:
        known = ", ".join(locomo_sample_ids(data))
        raise ReplayError(f"no LoCoMo conversation {sample_id!r} (there are: {known})")
    convo: dict[str, Any] = sample["conversation"]
    user_name, assistant_name = str(convo["speaker_a"]), str(convo["speaker_b"])
    roles: dict[str, Role] = {user_name: "user", assistant_name: "assistant"}
    numbers = sorted(
        int(match.group(1))
        for key, value in convo.items()
        if (match := _SESSION_KEY.match(key)) and isinstance(value, list) and value
    )
    safe_sample = safe_id(sample_id)
    sessions = []
    for number in numbers:
        date_key = f"session_{number}_date_time"
        if date_key not in convo:
            raise ReplayError(f"LoCoMo {sample_id} session_{number} has no {date_key}")
        created_at = parse_locomo_date(str(convo[date_key]))
        messages = []
        for turn in convo[f"session_{number}"]:
            speaker = str(turn.get("speaker", ""))
            if speaker not in roles:
                raise ReplayError(
                    f"LoCoMo {sample_id} turn {turn.get('dia_id')}: unknown speaker {speaker!r}"
                )
            content = locomo_turn_content(turn)
            if content:
                messages.append(Message(roles[speaker], content, speaker, created_at))
        if messages:
            session_id = f"locomo:{safe_sample}:session-{number}"
            sessions.append(Session(session_id, tuple(messages)))
    return Conversation(sample_id, f"locomo:{safe_sample}", tuple(sessions))


def memorybank_user_names(data: dict[str, Any]) -> list[str]:
    return [str(user.get("name") or key).strip() for key, user in data.items()]


def load_memorybank(data: dict[str, Any], name: str) -> Conversation:
    """One MemoryBank user as a conversation: a session per non-empty day, in date order."""
    wanted = name.strip()
    user = next(
        (
            value
            for key, value in data.items()
            if key.strip() == wanted or str(value.get("name") or "").strip() == wanted
        ),
        None,
    )
    if user is None:
        known = ", ".join(memorybank_user_names(data))
        raise ReplayError(f"no MemoryBank user {name!r} (there are: {known})")
    user_name = str(user.get("name") or wanted).strip()
    safe_user = safe_id(user_name)
    history: dict[str, list[dict[str, Any]]] = user.get("history") or {}
    sessions = []
    for day in sorted(history):
        try:
            created_at = iso_utc(datetime.strptime(day.strip(), "%Y-%m-%d").replace(tzinfo=UTC))
        except ValueError as exc:
            raise ReplayError(f"unreadable MemoryBank date {day!r} for {user_name}") from exc
        messages = []
        for exchange in history[day] or []:
            query = str(exchange.get("query") or "").strip()[:MAX_CONTENT_CHARS]
            response = str(exchange.get("response") or "").strip()[:MAX_CONTENT_CHARS]
            if query:
                messages.append(Message("user", query, user_name, created_at))
            if response:
                messages.append(Message("assistant", response, MEMORYBANK_ASSISTANT, created_at))
        if messages:
            session_id = f"memorybank:{safe_user}:{safe_id(day)}"
            sessions.append(Session(session_id, tuple(messages)))
    return Conversation(user_name, f"memorybank:{safe_user}", tuple(sessions))


def load_conversation(dataset: str, path: Path, conversation: str) -> Conversation:
    """Read ``path`` and load one conversation of ``dataset`` (``locomo`` or ``memorybank``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReplayError(
            f"cannot read {path}: {exc.strerror or exc} (the datasets are not part of the "
            "project: set KIVIDB_DATA_DIR to the folder that holds locomo/locomo10.json and "
            "memorybank/en/memory_bank_en.json, or name the file with --file; see the README)"
        ) from exc
    except ValueError as exc:
        raise ReplayError(f"{path} is not JSON: {exc}") from exc
    if dataset == "locomo":
        if not isinstance(data, list):
            raise ReplayError(f"{path} is not a LoCoMo file (expected a JSON list)")
        return load_locomo(data, conversation)
    if dataset == "memorybank":
        if not isinstance(data, dict):
            raise ReplayError(f"{path} is not a MemoryBank file (expected a JSON object)")
        return load_memorybank(data, conversation)
    raise ReplayError(f"unknown dataset {dataset!r}")


def first_sessions(conversation: Conversation, count: int | None) -> Conversation:
    """The conversation cut to its first ``count`` sessions (all when ``count`` is None)."""
    if count is None:
        return conversation
    return Conversation(conversation.label, conversation.actor_id, conversation.sessions[:count])


def agent_steps(session: Session) -> list[Step]:
    """The agent loop over one session: each user message and the replies up to the next one.

    Messages before the first user message form a step without a query. A step never holds more
    than the API's 100 events per call (a longer run of replies continues in query-less steps).
    """
    groups: list[tuple[str | None, list[Message]]] = []
    for message in session.messages:
        if message.role == "user":
            groups.append((message.content[:MAX_QUERY_CHARS], [message]))
        elif groups:
            groups[-1][1].append(message)
        else:
            groups.append((None, [message]))
    steps = []
    for query, messages in groups:
        for start in range(0, len(messages), MAX_EVENTS_PER_CALL):
            chunk = tuple(messages[start : start + MAX_EVENTS_PER_CALL])
            steps.append(Step(query if start == 0 else None, chunk))
    return steps


# --- statistics --------------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@dataclass
class Timings:
    events: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)

    def summary(self) -> str:
        """``latency median .., p99 .. (all requests); events median .., recall median ..``."""
        every = self.events + self.recall
        if not every:
            return "no requests"
        text = f"latency median {_ms(statistics.median(every))}, p99 {_ms(percentile(every, 99))}"
        kinds = [
            f"{kind} median {_ms(statistics.median(values))}"
            for kind, values in (("events", self.events), ("recall", self.recall))
            if values
        ]
        return f"{text} (all requests); {', '.join(kinds)}"


# --- the API -----------------------------------------------------------------------------------


class MemoryApi:
    """The few calls an agent makes, each timed, through the Python client (``kividb_memory``);
    any failure becomes a ``ReplayError``."""

    def __init__(self, client: MemoryClient, instance: str, store: str) -> None:
        self._client = client
        self._instance, self._name = instance, store
        self._store = client.store(instance, store)

    def _call(self, what: str, call: Callable[[], T]) -> tuple[T, float]:
        """``(answer, seconds)`` of ``call``; every client error raises ``ReplayError``."""
        started = time.perf_counter()
        try:
            answer = call()
        except AuthenticationError as exc:
            raise ReplayError(
                f"the API key was rejected ({exc}); pass --api-key or set KIVIDB_API_KEY"
            ) from exc
        except ApiConnectionError as exc:
            if exc.connected:
                raise ReplayError(
                    f"{what}: no answer from {self._client.base_url} ({exc})"
                ) from exc
            raise ReplayError(
                f"cannot reach the API at {self._client.base_url} ({exc}); "
                "is the local stack running (make run)?"
            ) from exc
        except KiviDBError as exc:
            raise ReplayError(f"{what} failed: {exc}") from exc
        return answer, time.perf_counter() - started

    def put_store(self) -> None:
        """Create the store with its defaults, or leave it as it is."""
        self._call("PUT store", lambda: self._client.put_store(self._instance, self._name))

    def delete_session(self, session_id: str) -> None:
        def delete() -> None:
            with contextlib.suppress(NotFoundError):
                self._store.delete_session(session_id)

        self._call(f"DELETE session {session_id}", delete)

    def add_events(self, session_id: str, actor_id: str, messages: Sequence[Message]) -> float:
        events = [message.event() for message in messages]
        answer, elapsed = self._call(
            f"events for {session_id}",
            lambda: self._store.add_events(session_id, events, actor_id=actor_id),
        )
        if answer.added != len(messages):
            raise ReplayError(
                f"events for {session_id}: expected {len(messages)} added, got {answer.added}"
            )
        return elapsed

    def recall(self, session_id: str, actor_id: str, query: str | None) -> tuple[RecallView, float]:
        return self._call(
            f"recall for {session_id}",
            lambda: self._store.recall(session_id, query=query or None, actor_id=actor_id),
        )


# --- the replay --------------------------------------------------------------------------------


@dataclass
class Outcome:
    sessions: int
    messages: int
    events_calls: int
    recall_calls: int
    seconds: float
    timings: Timings
    final: RecallView

    def line(self, label: str) -> str:
        return (
            f"replayed {label}: {self.sessions} sessions, {self.messages} messages, "
            f"{self.events_calls} events calls, {self.recall_calls} recall calls in "
            f"{self.seconds:.1f} s; {self.timings.summary()}"
        )


def replay(
    api: MemoryApi, conversation: Conversation, progress: Progress, *, fresh: bool = False
) -> Outcome:
    """Push ``conversation`` through the API session by session (one stage of ``progress`` each,
    counting its messages); recall the last one at the end."""
    if not conversation.sessions:
        raise ReplayError(f"{conversation.label} has no sessions to replay")
    started = time.perf_counter()
    api.put_store()
    if fresh:
        for session in conversation.sessions:
            api.delete_session(session.session_id)
    timings = Timings()
    messages = 0
    count = len(conversation.sessions)
    for index, session in enumerate(conversation.sessions, start=1):
        name = f"session {index}/{count}"
        with progress.stage(name, len(session.messages), "msg") as stage:
            for step in agent_steps(session):
                if step.query is not None:
                    _, elapsed = api.recall(session.session_id, conversation.actor_id, step.query)
                    timings.recall.append(elapsed)
                timings.events.append(
                    api.add_events(session.session_id, conversation.actor_id, step.messages)
                )
                messages += len(step.messages)
                stage.advance(len(step.messages))
    last = conversation.sessions[-1].session_id
    final, elapsed = api.recall(last, conversation.actor_id, None)
    timings.recall.append(elapsed)
    return Outcome(
        sessions=len(conversation.sessions),
        messages=messages,
        events_calls=len(timings.events),
        recall_calls=len(timings.recall),
        seconds=time.perf_counter() - started,
        timings=timings,
        final=final,
    )


def print_final(final: RecallView, *, with_context: bool) -> None:
    session = final.session_id
    if with_context:
        print(f"--- recall of {session} (context) ---")
        print(final.context.rstrip())
        print("---")
    summary = "yes" if final.summary else "no"
    print(
        f"final recall of {session}: {len(final.messages)} messages, "
        f"{len(final.memories)} memories, summary: {summary}"
    )


# --- command line ------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.replay",
        description="Replay LoCoMo or MemoryBank conversations through the running memory API.",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("KIVIDB_URL") or default_url(),
        help="the running API (default: $KIVIDB_URL, else http://127.0.0.1:$PORT, port 3000)",
    )
    parser.add_argument("--api-key", help="default: $KIVIDB_API_KEY, else .local/api_key")
    parser.add_argument("--instance", default="local")
    parser.add_argument("--store", default="replay")
    parser.add_argument("--dataset", choices=sorted(DEFAULT_FILES), default="locomo")
    parser.add_argument(
        "--file",
        type=Path,
        help="default: the dataset's file under $KIVIDB_DATA_DIR (else ../shared/data beside "
        "the project)",
    )
    parser.add_argument(
        "--conversation", help="LoCoMo sample_id (default conv-26) or MemoryBank user (Emily)"
    )
    parser.add_argument("--sessions", type=_positive, help="replay only the first N sessions")
    parser.add_argument(
        "--fresh", action="store_true", help="delete the replayed sessions before replaying"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress, no context")
    return parser.parse_args(argv)


def resolve_api_key(given: str | None) -> str:
    if given:
        return given.strip()
    if key := os.environ.get("KIVIDB_API_KEY", "").strip():
        return key
    key_file = ROOT / ".local" / "api_key"
    try:
        key = key_file.read_text(encoding="utf-8").strip()
    except OSError:
        key = ""
    if not key:
        raise ReplayError(
            f"no API key: pass --api-key, set KIVIDB_API_KEY, or start the stack (make run) so "
            f"{key_file} exists"
        )
    return key


def run(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    path: Path = args.file if args.file is not None else DEFAULT_FILES[args.dataset]
    if not path.is_absolute() and args.file is None:
        path = ROOT / path
    name = args.conversation or DEFAULT_CONVERSATIONS[args.dataset]
    conversation = first_sessions(load_conversation(args.dataset, path, name), args.sessions)
    key = resolve_api_key(args.api_key)
    try:
        client = MemoryClient(args.url, key, timeout=60.0)
    except ValueError as exc:
        raise ReplayError(str(exc)) from exc
    with client:
        api = MemoryApi(client, args.instance, args.store)
        progress = Progress(f"replay {conversation.label}", quiet=args.quiet)
        outcome = replay(api, conversation, progress, fresh=args.fresh)
    print_final(outcome.final, with_context=not args.quiet)
    progress.summary(outcome.line(conversation.label))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except ReplayError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("replay: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
