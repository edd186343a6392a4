"""A scripted stand-in for a model provider, for trying background work locally and in tests.

``python -m tools.scripted_model [--port 8765]`` serves OpenAI's shapes on loopback:

- ``POST /v1/chat/completions``: answers the prompts of ``agent_memory.background.prompts`` by
  rule, not by a model. Extraction: every message line of the prompt (``[seq] role "name",
  date UTC: "text"``, the quoted parts JSON strings) of the user, or of a named speaker, whose
  text says something about the speaker ("I ...", "my ...", "we ...") becomes a memory "<name>
  said on <date>: <first such sentence>" (episodic when the sentence mentions a time word, else
  semantic), with ``messages`` naming that line's number; like a model following the prompt,
  it reads only the line's own speaker, never one the text claims. Updates (``update_rule``):
  a sentence has a *subject*, the words between "my" or "our" and "is", "are", "was" or
  "were" ("My favourite colour is green" -> "favourite colour"), else the first group of
  ``SUBJECT_GROUPS`` one of its words belongs to ("I started eating fish again" -> diet), else
  none. A memory shown in the prompt's "Memories already kept" section (``[id] type, ...:
  "text"``; for a text "<who> said on <date>: <sentence>" the sentence) with the same subject
  is replaced: the new memory's ``supersedes`` is its id (the first such memory shown), unless
  it says the same sentence (then the new one is not written: already kept). Within one answer
  a later sentence of a subject replaces an earlier one of the same subject (only the later one
  is written). A memory without a subject supersedes nothing. ``occurred_at`` is the message's
  date moved by the sentence's relative day words (``DAY_WORDS``: today, yesterday, tomorrow,
  "N days/weeks ago", last week, last month, last year) or an explicit "on YYYY-MM-DD"; none
  when it has neither. ``ScriptedModel(supersede=False)`` (``--no-supersede``) never
  supersedes: it answers as extraction did before memories could be replaced (the
  benchmark's "plain add"). The operator's instructions (``instruction_rules``): a sentence
  holding a word of a "never keep ..." clause is not kept, and with a "keep only ..." clause
  a sentence must hold one of its words. Profile fields the prompt asks for
  (``profile_rule``): "my <field> is <value>" (and "I'm <Name>" for ``name``, "I live in
  <Place>" for a field about where the user lives) fill the answer's ``profile``, typed as the
  field asks, unless the profile as known now holds that value. Summarization: the previous
  summary followed by the first sentence
  of each folded message, cut to 1,500 characters. Consolidation: the plan of
  ``tools.scripted_consolidation`` (merge what it can tell is the same fact). The ``llm``
  reranker's prompt: each
  candidate scored by the share of the query's words it holds (``overlap``).
- ``POST /v1/embeddings``: a hashed bag of words (each lower-cased word adds a fixed random
  vector), so texts sharing words are close and the same text is identical.

It is deterministic and free, and speaks the same HTTP as a real provider, so the local stack,
the scheduler and the background function run unchanged. Point a store at it with
``llm_provider: custom, llm_base_url: http://127.0.0.1:8765/v1`` and the same for
``embed_*`` (the local stack must run with ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``). Every
request is counted in ``GET /stats``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
from collections import Counter
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from tools import scripted_consolidation

_QUOTED = r'"(?:[^"\\]|\\.)*"'
LINE = re.compile(
    rf"^\[(\d+)\] (\w+)(?: ({_QUOTED}))?, (\d{{4}}-\d{{2}}-\d{{2}}) [\d:]+ UTC: ({_QUOTED})$"
)
ABOUT_SELF = re.compile(r"\b(i|i'm|i've|my|we|our|me)\b", re.IGNORECASE)
TIME_WORDS = re.compile(
    r"\b(yesterday|today|tomorrow|last|next|week|weekend|month|year|ago|recently)\b", re.I
)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"\w+")
_RERANK_WORD = re.compile(r"[a-z0-9]+")
KNOWN = re.compile(
    rf"^\[(mem_[0-9a-f]{{20}})\] [a-z_]+(?:, happened [\d-]+)?, kept [\d-]+: ({_QUOTED})$"
)
SAID = re.compile(r"^.{1,200}? said on \d{4}-\d{2}-\d{2}: ")
ATTRIBUTE = re.compile(
    r"\b(?:my|our)\s+((?:[\w'’]+\s+){0,3}?[\w'’]+)\s+(?:is|are|was|were)\b", re.IGNORECASE
)
SUBJECT_GROUPS = {
    "diet": {"vegetarian", "vegan", "pescatarian", "meat", "fish", "eat", "eating", "diet"},
    "work": {"work", "works", "working", "job", "employer", "hired", "company"},
    "home": {"live", "lives", "living", "moved", "apartment", "house"},
    "partner": {"married", "engaged", "dating", "girlfriend", "boyfriend", "wife", "husband"},
    "pet": {"dog", "cat", "pet", "puppy", "kitten"},
}
"""Subjects of sentences that say no "my X is": a sentence with one of a group's words is
about that group (the first group in this order that it meets)."""
NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a": 1,
}
DAY_WORDS = re.compile(
    r"\b(today|yesterday|tomorrow|last week|last month|last year"
    r"|(\d+|one|two|three|four|five|six|seven|eight|nine|ten|a) (day|week)s? ago)\b",
    re.IGNORECASE,
)
EXPLICIT_DAY = re.compile(r"\bon (\d{4}-\d{2}-\d{2})\b")
_SHIFT = {
    "today": 0,
    "yesterday": -1,
    "tomorrow": 1,
    "last week": -7,
    "last month": -30,
    "last year": -365,
}


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to ``.``, ``!`` or ``?`` and a space), at most 300
    characters."""
    return SENTENCE.split(text.strip(), maxsplit=1)[0][:300]


def message_lines(prompt: str) -> list[tuple[str, str | None, str, str]]:
    """``(role, name, day, text)`` of each message line of a prompt, names and texts decoded
    from their JSON string literals."""
    found = []
    for line in prompt.split("\n"):
        match = LINE.match(line)
        if match:
            _, role, name, day, text = match.groups()
            found.append((role, json.loads(name) if name else None, day, json.loads(text)))
    return found


def known_memories(prompt: str) -> list[tuple[str, str]]:
    """``(id, text)`` of each memory the prompt shows as already kept, in the prompt's order."""
    found = []
    for line in prompt.split("\n"):
        match = KNOWN.match(line)
        if match:
            found.append((match.group(1), json.loads(match.group(2))))
    return found


def _said(text: str) -> str:
    """The sentence of a memory this model wrote ("<who> said on <date>: <sentence>"), or the
    whole text of any other memory."""
    return SAID.sub("", text, count=1)


def subject(sentence: str) -> str | None:
    """What a sentence is about (see the module docstring): ``attribute:<words>``,
    ``group:<name>``, or None."""
    match = ATTRIBUTE.search(sentence)
    if match:
        return "attribute:" + " ".join(match.group(1).lower().replace("’", "'").split())
    words = {w.lower() for w in WORD.findall(sentence)}
    for name, group in SUBJECT_GROUPS.items():
        if words & group:
            return "group:" + name
    return None


def occurred(sentence: str, day: str) -> str | None:
    """The date the sentence's event happened: an explicit "on YYYY-MM-DD", else the message's
    ``day`` moved by its first relative day words (``DAY_WORDS``), else None."""
    explicit = EXPLICIT_DAY.search(sentence)
    if explicit:
        return explicit.group(1)
    match = DAY_WORDS.search(sentence)
    if not match:
        return None
    words = match.group(1).lower()
    if words in _SHIFT:
        shift = _SHIFT[words]
    else:
        count = match.group(2).lower()
        n = NUMBERS[count] if count in NUMBERS else int(count)
        shift = -n * (7 if match.group(3).lower() == "week" else 1)
    return (date.fromisoformat(day) + timedelta(days=shift)).isoformat()


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()).rstrip(".!") == " ".join(b.lower().split()).rstrip(".!")


INSTRUCTIONS_HEADING = "Instructions from the operator of this service, quoted."
NEVER_KEEP = re.compile(r"\b(?:never|do not|don't) keep\b([^.;!?]*)", re.IGNORECASE)
KEEP_ONLY = re.compile(r"\bkeep only\b([^.;!?]*)", re.IGNORECASE)
PLAIN_WORDS = {
    "about",
    "their",
    "there",
    "these",
    "those",
    "that",
    "this",
    "with",
    "from",
    "what",
    "when",
    "where",
    "which",
    "user",
    "users",
    "user's",
    "keep",
    "only",
    "never",
    "other",
    "anything",
    "things",
    "facts",
    "memories",
    "small",
    "talk",
}
PROFILE_FIELD = re.compile(
    r"^- ([A-Za-z0-9._:@-]+) \((text|list|number|boolean|date)\): (" + _QUOTED + ")$"
)
PROFILE_KNOWN = re.compile(r"^- ([A-Za-z0-9._:@-]+): (.+)$")


def instruction_rules(system_prompt: str) -> tuple[set[str], set[str]]:
    """What the operator's instructions (the quoted line after ``INSTRUCTIONS_HEADING``) tell
    this model, by rule: the words after "never keep" (or "do not keep", "don't keep") up to
    the end of that clause, and after "keep only": a sentence holding one of the first is left
    out, and with any of the second, a sentence must hold one of them. Words of four letters or
    more, without plain ones (``PLAIN_WORDS``), lower-cased."""
    lines = system_prompt.split("\n")
    text = ""
    for at, line in enumerate(lines):
        if line.startswith(INSTRUCTIONS_HEADING) and at + 1 < len(lines):
            text = _json_prefix(lines[at + 1])
    never: set[str] = set()
    only: set[str] = set()
    for pattern, words in ((NEVER_KEEP, never), (KEEP_ONLY, only)):
        for clause in pattern.findall(text):
            words |= {
                w.lower()
                for w in WORD.findall(clause)
                if len(w) >= 4 and w.lower() not in PLAIN_WORDS
            }
    return never, only


def _allowed(sentence: str, never: set[str], only: set[str]) -> bool:
    words = {w.lower() for w in WORD.findall(sentence)}
    if words & never:
        return False
    return not only or bool(words & only)


def profile_fields(system_prompt: str) -> list[tuple[str, str, str]]:
    """``(name, type, description)`` of each profile field the prompt asks to fill."""
    found = []
    for line in system_prompt.split("\n"):
        match = PROFILE_FIELD.match(line)
        if match:
            found.append((match.group(1), match.group(2), _json_prefix(match.group(3))))
    return found


def _field_words(name: str) -> str:
    return " ".join(re.split(r"[._:@-]+", name.lower())).strip()


def _typed(kind: str, raw: str) -> Any:
    raw = raw.strip().rstrip(".!")
    if kind == "list":
        return [part.strip() for part in re.split(r",\s*|\s+and\s+", raw) if part.strip()]
    if kind == "number":
        number = re.search(r"-?\d+(?:\.\d+)?", raw)
        return (
            float(number.group(0))
            if number and "." in number.group(0)
            else (int(number.group(0)) if number else None)
        )
    if kind == "boolean":
        lowered = raw.lower()
        return True if lowered in ("yes", "true") else False if lowered in ("no", "false") else None
    if kind == "date":
        day = re.search(r"\d{4}-\d{2}-\d{2}", raw)
        return day.group(0) if day else None
    return raw


def profile_rule(system_prompt: str, user_prompt: str) -> dict[str, Any]:
    """The profile rule: for each field the prompt asks for, the user's sentences "my <field>
    is/are <value>" (the field's name, its separators as spaces), and for a field named
    ``name`` also "I'm <Name>" / "I am <Name>", for a field whose name or description speaks of
    where the user lives also "I live in <Place>"; the value typed as the field asks (a list
    split at commas and "and"), left out when the profile as known now already holds it."""
    fields = profile_fields(system_prompt)
    if not fields:
        return {}
    known: dict[str, str] = {}
    for line in user_prompt.split("\n"):
        match = PROFILE_KNOWN.match(line)
        if match and match.group(1) in {f[0] for f in fields}:
            known[match.group(1)] = match.group(2)
    found: dict[str, Any] = {}
    for _, role, _, _, text in _numbered_lines(user_prompt):
        if role != "user":
            continue
        for sentence in SENTENCE.split(text):
            for name, kind, description in fields:
                value = _profile_value(name, kind, description, sentence)
                if value is not None:
                    found[name] = value
    return {
        n: v
        for n, v in found.items()
        if known.get(n) != json.dumps(v) and known.get(n) != _shown(v)
    }


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(value)


def _profile_value(name: str, kind: str, description: str, sentence: str) -> Any:
    words = _field_words(name)
    said = re.search(rf"\bmy {re.escape(words)}s? (?:is|are|was|were) ([^.!?]+)", sentence, re.I)
    if said:
        return _typed(kind, said.group(1))
    if words == "name":
        named = re.search(r"\b(?:i'm|i am|call me)\s+([A-Z][\w'-]+)", sentence)
        if named:
            return _typed(kind, named.group(1))
    about = f"{words} {description}".lower()
    if any(w in about for w in ("live", "city", "location", "home")):
        place = re.search(r"\b[Ii] live in ([A-Z][\w' -]*[\w])", sentence)
        if place:
            return _typed(kind, place.group(1))
    return None


def extract(user_prompt: str, supersede: bool = True, system_prompt: str = "") -> dict[str, Any]:
    """The memories rule: one per message line that says something about its speaker, with
    the updates rule when ``supersede`` (module docstring), the operator's instructions read
    by ``instruction_rules`` (a sentence they leave out is not kept), and, when the prompt
    asks for profile fields, their values (``profile_rule``) as the answer's ``profile``."""
    shown = known_memories(user_prompt) if supersede else []
    never, only = instruction_rules(system_prompt)
    memories: list[dict[str, Any]] = []
    subjects: list[str | None] = []
    for seq, role, name, day, text in _numbered_lines(user_prompt):
        if role != "user" and not name:
            continue
        sentences = [
            s for s in SENTENCE.split(text) if ABOUT_SELF.search(s) and _allowed(s, never, only)
        ]
        if not sentences:
            continue
        sentence = sentences[0].strip()[:300]
        who = name or "The user"
        kind = "episodic" if TIME_WORDS.search(sentence) else "semantic"
        topics = [w.lower() for w in WORD.findall(sentence) if len(w) > 5][:3]
        item: dict[str, Any] = {
            "text": f"{who} said on {day}: {sentence}",
            "type": kind,
            "topics": topics,
            "messages": [seq],
        }
        when = occurred(sentence, day)
        if when is not None:
            item["occurred_at"] = when
        about = subject(sentence) if supersede else None
        if about is not None:
            same = [(i, t) for i, t in shown if subject(_said(t)) == about]
            if any(_same(_said(t), sentence) for _, t in same):
                continue  # already kept, unchanged
            if same:
                item["supersedes"] = same[0][0]
            if about in subjects:  # a later sentence of the subject in this answer wins
                at = subjects.index(about)
                earlier = memories.pop(at)
                subjects.pop(at)
                if "supersedes" in earlier:
                    item["supersedes"] = earlier["supersedes"]
        memories.append(item)
        subjects.append(about)
    profile = profile_rule(system_prompt, user_prompt)
    return {"memories": memories, "profile": profile} if profile else {"memories": memories}


def _numbered_lines(prompt: str) -> list[tuple[int, str, str | None, str, str]]:
    found = []
    for line in prompt.split("\n"):
        match = LINE.match(line)
        if match:
            seq, role, name, day, text = match.groups()
            found.append(
                (int(seq), role, json.loads(name) if name else None, day, json.loads(text))
            )
    return found


def summarize(user_prompt: str) -> dict[str, Any]:
    """The summary rule: the previous summary, then the first sentence of each message."""
    previous = ""
    if user_prompt.startswith("Current summary:\n"):
        previous = user_prompt.split("\n", 1)[1].split("\n\nMessages to fold", 1)[0]
        previous = "" if previous == "(empty)" else json.loads(previous)
    parts = [previous] if previous else []
    for role, name, _, text in message_lines(user_prompt):
        parts.append(f"{name or role}: {first_sentence(text)}")
    return {"summary": " ".join(parts)[-1500:] or "Nothing yet."}


def overlap(query: str, text: str) -> float:
    """A reranker's relevance by rule: the share of the query's distinct words (lower-cased
    runs of letters and digits) that ``text`` holds, 0 to 1 (the loopback rerankers' order)."""
    wanted = set(_RERANK_WORD.findall(query.lower()))
    found = set(_RERANK_WORD.findall(text.lower()))
    return len(wanted & found) / len(wanted) if wanted else 0.0


_CANDIDATE = re.compile(r'^\[(\d+)\] (".*")')
_QUERY = re.compile(r'^Query: (".*")')


def rerank(user_prompt: str) -> dict[str, Any]:
    """The ``llm`` reranker's rule (``agent_memory.providers.llm_reranker``): each candidate line
    ``[n] "text"`` scored by ``overlap`` with the ``Query: "..."`` line (quoted parts read as
    JSON strings; a cut literal's note after its closing quote is left out)."""
    query, scores = "", []
    for line in user_prompt.splitlines():
        if (found := _QUERY.match(line)) is not None:
            query = _json_prefix(found[1])
        elif (found := _CANDIDATE.match(line)) is not None:
            scores.append(
                {"n": int(found[1]), "score": round(overlap(query, _json_prefix(found[2])), 4)}
            )
    return {"scores": scores}


def _json_prefix(literal: str) -> str:
    """The JSON string at the start of ``literal`` (what follows its closing quote ignored)."""
    text, _ = json.JSONDecoder().raw_decode(literal)
    return str(text)


def embed(text: str, dimensions: int) -> list[float]:
    """A unit vector: the sum of one fixed random vector per word (hashed)."""
    total = np.zeros(dimensions, dtype=np.float64)
    for word, count in Counter(w.lower() for w in WORD.findall(text)).items():
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        total += count * np.random.default_rng(seed).standard_normal(dimensions)
    if not total.any():
        total[0] = 1.0
    return [float(x) for x in total / np.linalg.norm(total)]


class ScriptedModel:
    """The server's state: request counts by kind (what ``/stats`` shows)."""

    def __init__(self, supersede: bool = True, dimensions: int = 384) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.supersede = supersede
        self.dimensions = dimensions

    def count(self, kind: str) -> None:
        """Count one request of ``kind`` (``extract``, ``summarize``, ``rerank``, ``embed``)."""
        with self.lock:
            self.counts[kind] += 1

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """A chat-completions answer to ``body``: the summary rule for a summarization prompt
        (its system message mentions the "running summary"), the rerank rule for the ``llm``
        reranker's (it asks to "judge how useful each stored memory" is), else the memories
        rule."""
        messages = body.get("messages") or []
        system = str(messages[0].get("content", "")) if messages else ""
        user = str(messages[-1].get("content", "")) if messages else ""
        if "running summary" in system:
            self.count("summarize")
            answer = summarize(user)
        elif "judge how useful each stored memory" in system:
            self.count("rerank")
            answer = rerank(user)
        elif system.startswith(scripted_consolidation.HEADING):
            self.count("consolidate")
            answer = scripted_consolidation.plan(user)
        else:
            self.count("extract")
            answer = extract(user, self.supersede, system)
        text = json.dumps(answer)
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {
                "prompt_tokens": len(WORD.findall(system + user)),
                "completion_tokens": len(WORD.findall(text)),
            },
        }

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """An embeddings answer to ``body``: ``embed`` of each input, ``dimensions`` long
        (the body's, else the server's, 384 unless it was started with another)."""
        self.count("embed")
        inputs = body.get("input") or []
        inputs = [inputs] if isinstance(inputs, str) else inputs
        dimensions = int(body.get("dimensions") or self.dimensions)
        words = sum(len(WORD.findall(str(t))) for t in inputs)  # its "tokens"
        return {
            "object": "list",
            "model": body.get("model", "scripted"),
            "data": [
                {"object": "embedding", "index": i, "embedding": embed(t, dimensions)}
                for i, t in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": words, "total_tokens": words},
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes; with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, about 40 ms on Linux, on every answer.
    disable_nagle_algorithm = True
    server: ScriptedServer

    def do_GET(self) -> None:
        if self.path == "/stats":
            self._send(200, dict(self.server.model.counts))
        else:
            self._send(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "the body is not JSON"}})
            return
        if self.path == "/v1/chat/completions":
            self._send(200, self.server.model.chat(body))
        elif self.path == "/v1/embeddings":
            self._send(200, self.server.model.embeddings(body))
        else:
            self._send(404, {"error": {"message": "no such route"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ScriptedServer(ThreadingHTTPServer):
    """The HTTP server; ``url`` is its ``/v1`` base URL once bound."""

    daemon_threads = True

    def __init__(self, port: int = 0, supersede: bool = True, dimensions: int = 384) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.model = ScriptedModel(supersede, dimensions)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> threading.Thread:
        """Serve from a daemon thread (for tests); ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        return thread


def main(argv: list[str] | None = None) -> int:
    """Serve on ``--port`` (default 8765) until interrupted; exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m tools.scripted_model")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--no-supersede", action="store_true", help="never name a memory to supersede"
    )
    args = parser.parse_args(argv)
    server = ScriptedServer(args.port, supersede=not args.no_supersede)
    print(f"scripted model provider at {server.url} (chat/completions, embeddings; GET /stats)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
