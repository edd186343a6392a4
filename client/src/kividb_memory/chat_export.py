"""Conversations from ChatGPT's and Claude's data exports as sessions of one actor, through the
session import route (``PUT .../import/sessions/{session_id}``, docs/routes.md "Export and
import"), with their original times: ``read_chat_export``, ``session_pages``, ``import_chat``
(``python -m tools.transfer import-chat`` is its command line; the TypeScript client has the same
as ``@kividb/memory``'s ``importChat``).

Neither vendor documents its export's format; the shapes read here are the ones the public
references describe and that exports have:

- **ChatGPT** (Settings, Data controls, Export data: ``conversations.json``): a JSON array of
  conversations, each ``{"id"`` (also ``"conversation_id"``), ``"title"``, ``"create_time"`` and
  ``"update_time"`` (Unix epoch seconds, floats), ``"current_node"`` (the id of the leaf of the
  branch on screen), ``"mapping"}``: a tree of nodes by id, ``{"id", "parent", "children",
  "message"}``, whose root has ``"parent": null`` and often ``"message": null``. A message is
  ``{"id", "author": {"role": "system"|"user"|"assistant"|"tool", "name"}, "create_time"``
  (epoch seconds or null), ``"content": {"content_type", ...}, "recipient", "weight",
  "metadata"}``; ``content_type`` ``"text"`` and ``"multimodal_text"`` carry ``"parts"`` (strings,
  or objects such as ``{"content_type": "image_asset_pointer", ...}``), ``"code"`` and
  ``"execution_output"`` carry ``"text"``. Edited prompts and regenerated answers are sibling
  branches: the conversation as its user last saw it is the path from ``current_node`` back to
  the root, reversed. (References: whychose.com, "ChatGPT conversations.json Format — Field
  Reference"; difegam.github.io/chatgpt-to-markdown, "Data Models"; portable-ai-memory.org,
  "OpenAI / ChatGPT".)
- **Claude** (Settings, Privacy, Export data: ``conversations.json``): a JSON array of
  conversations, each ``{"uuid", "name", "created_at", "updated_at"`` (ISO 8601 strings),
  ``"chat_messages"}``, the messages in order, each ``{"uuid", "sender": "human"|"assistant",
  "text", "content": [{"type": "text", "text"}, {"type": "tool_use", "name", "input"},
  {"type": "tool_result", "name", "content"}, {"type": "thinking", "thinking"}, ...],
  "created_at", "attachments": [{"file_name", "extracted_content"}], "files": [{"file_name"}]}``.
  No branches. (References: whychose.com, "Claude Conversation Export Format — Field
  Reference"; takeoutday.org, "How to export Claude data".)

What maps to what: a conversation is a session ``chatgpt-<id>`` or ``claude-<uuid>`` (its id's
characters outside the API's alphabet written as ``-``) of the actor given, created at the
conversation's time; each message one message with its role (ChatGPT's four roles as they are,
Claude's ``human`` as ``user``), its time (a message without one takes the one before it), its
text as content, the author's ``name`` for a tool (``browser``, ``python``), and an ``item``
naming its source, id and kind (ChatGPT's ``content_type`` and ``recipient``; Claude's tool
uses and results with their inputs, under 32,000 characters as JSON). Extraction is armed on
the sessions (``read_seq`` 0, as after an append) unless ``extract=False``, which imports them
read (``read_seq`` = ``message_count``): working memory only.

What does not map: the other branches of a ChatGPT conversation; images, files and audio (a
part that is not text is shown as ``[image]``, ``[file: name]``...; Claude's attachments by
name, their extracted text left out); messages with no text at all (a hidden system message, an
empty tool call) are left out; a text over 32,000 characters is cut, ending ``… [N characters
cut]``; titles, models and projects have no place in a session (the dry run shows titles).

Errors: ``ChatExportError`` names the first malformed conversation (its place in the file, id
and title) and what is wrong with it; ``import_chat`` checks every conversation before it
writes any.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from kividb_memory.client import StoreClient

Source = Literal["chatgpt", "claude"]
MAX_CONTENT_CHARS = 32_000
"""The API's limit of a message's content, and of its item as compact JSON."""
PAGE = 200
"""Messages per import call (the route's limit)."""
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
_SENDERS = {"human": "user", "assistant": "assistant"}
_NOT_ID = re.compile(r"[^A-Za-z0-9_:@\-.]")


class ChatExportError(ValueError):
    """A file that is not an export of the format asked for, or its first malformed
    conversation: the message names it (place, id, title) and the problem."""


@dataclass(frozen=True)
class ChatMessage:
    """One message as the session keeps it (``created_at`` aware, UTC)."""

    role: str
    content: str
    created_at: datetime
    name: str | None = None
    item: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChatConversation:
    """One conversation: its session id, title, start and messages in order."""

    session_id: str
    title: str
    created_at: datetime
    messages: list[ChatMessage] = field(default_factory=list)

    @property
    def last_event_at(self) -> datetime:
        return max([self.created_at, *(m.created_at for m in self.messages)])


def _cut(text: str) -> str:
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    note = f" … [{len(text) - MAX_CONTENT_CHARS} characters cut]"
    return text[: MAX_CONTENT_CHARS - len(note)] + note


def _item(item: dict[str, Any]) -> dict[str, Any] | None:
    """The item, or None when its JSON passes the API's limit."""
    compact = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    return item if len(compact) <= MAX_CONTENT_CHARS else None


def _epoch(value: Any, what: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError(f"{what} is {value!r}, not a time in epoch seconds")
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"{what} {value!r} is out of range") from exc


def _iso(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{what} is {value!r}, not an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{what} {value!r} is not an ISO 8601 time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _session_id(source: Source, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"its id is {raw!r}, not a non-empty string")
    return f"{source}-{_NOT_ID.sub('-', raw.strip())}"[:256]


# --- ChatGPT ------------------------------------------------------------------------------


def _chatgpt_part(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        kind = str(part.get("content_type", "part"))
        if "image" in kind:
            return "[image]"
        if "audio" in kind:
            return str(part.get("text") or "[audio]")
        return f"[{kind}]"
    return ""


def _chatgpt_text(content: dict[str, Any]) -> str:
    """The words of a ChatGPT message's content, whatever its ``content_type``."""
    if isinstance(content.get("parts"), list):
        return "\n".join(t for t in (_chatgpt_part(p) for p in content["parts"]) if t)
    for name in ("text", "result"):
        if isinstance(content.get(name), str):
            return str(content[name])
    if isinstance(content.get("thoughts"), list):  # a reasoning model's thoughts
        return "\n".join(
            str(t.get("content", "")) for t in content["thoughts"] if isinstance(t, dict)
        )
    if isinstance(content.get("content"), str):  # a reasoning recap
        return str(content["content"])
    texts = [content.get(k) for k in ("user_profile", "user_instructions")]
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def _chatgpt_branch(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to ``current_node``; ``ValueError`` for a broken tree."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError("its mapping is missing or empty")
    node_id = conversation.get("current_node")
    if node_id is None:  # no node on screen named: the last leaf in the file's order
        leaves = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("children")]
        node_id = leaves[-1] if leaves else None
    branch: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id is not None:
        if not isinstance(node_id, str) or node_id in seen:
            raise ValueError(f"its message tree loops or names {node_id!r} as a node")
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise ValueError(f"node {node_id!r} of its branch is not in its mapping")
        seen.add(node_id)
        branch.append(node)
        node_id = node.get("parent")
    return branch[::-1]


def _chatgpt_message(message: dict[str, Any], previous: datetime) -> ChatMessage | None:
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in _ROLES:
        raise ValueError(f"message {message.get('id')!r} has the role {role!r}")
    content = message.get("content")
    if not isinstance(content, dict):
        raise ValueError(f"message {message.get('id')!r} has no content object")
    text = _chatgpt_text(content).strip()
    if not text:
        return None
    at = message.get("create_time")
    when = previous if at is None else _epoch(at, f"message {message.get('id')!r}'s create_time")
    name = author.get("name") if isinstance(author, dict) else None
    item = {
        "source": "chatgpt",
        "id": message.get("id"),
        "content_type": content.get("content_type"),
    }
    if message.get("recipient") not in (None, "all"):
        item["recipient"] = message.get("recipient")
    return ChatMessage(
        role=_ROLES[role],
        content=_cut(text),
        created_at=when,
        name=name[:128] if isinstance(name, str) and name else None,
        item=_item(item),
    )


def _chatgpt(conversation: dict[str, Any]) -> ChatConversation:
    started = _epoch(conversation.get("create_time"), "its create_time")
    messages: list[ChatMessage] = []
    for node in _chatgpt_branch(conversation):
        message = node.get("message")
        if message is None:
            continue
        if not isinstance(message, dict):
            raise ValueError(
                f"node {node.get('id')!r} holds {type(message).__name__}, not a message"
            )
        kept = _chatgpt_message(message, messages[-1].created_at if messages else started)
        if kept is not None:
            messages.append(kept)
    raw_id = conversation.get("id") or conversation.get("conversation_id")
    title = conversation.get("title")
    return ChatConversation(
        _session_id("chatgpt", raw_id), title if isinstance(title, str) else "", started, messages
    )


# --- Claude -------------------------------------------------------------------------------


def _claude_blocks(blocks: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The texts of a Claude message's content blocks, and its tool blocks as kept."""
    texts: list[str] = []
    tools: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            tools.append(
                {"type": "tool_use", "name": block.get("name"), "input": block.get("input")}
            )
            given = json.dumps(block.get("input"), ensure_ascii=False, separators=(",", ":"))
            texts.append(f"[tool {block.get('name')}: {given}]")
        elif kind == "tool_result":
            inner = block.get("content")
            said = (
                [b.get("text", "") for b in inner if isinstance(b, dict)]
                if isinstance(inner, list)
                else []
            )
            tools.append(
                {
                    "type": "tool_result",
                    "name": block.get("name"),
                    "is_error": block.get("is_error", False),
                }
            )
            texts.append(f"[result of {block.get('name')}: {' '.join(s for s in said if s)}]")
    return texts, tools


def _claude_message(message: Any, previous: datetime) -> ChatMessage | None:
    if not isinstance(message, dict):
        raise ValueError(f"a message is {type(message).__name__}, not an object")
    role = _SENDERS.get(str(message.get("sender")))
    if role is None:
        raise ValueError(
            f"message {message.get('uuid')!r} has the sender {message.get('sender')!r}"
        )
    blocks = message.get("content")
    texts, tools = _claude_blocks(blocks) if isinstance(blocks, list) else ([], [])
    text = (
        message.get("text") if isinstance(message.get("text"), str) and message.get("text") else ""
    )
    if not text or tools:
        text = "\n".join(t for t in texts if t) or text
    files = [
        f.get("file_name")
        for f in [*(message.get("attachments") or []), *(message.get("files") or [])]
        if isinstance(f, dict) and f.get("file_name")
    ]
    text = "\n".join([str(text).strip(), *(f"[file: {name}]" for name in files)]).strip()
    if not text:
        return None
    at = message.get("created_at")
    when = previous if at is None else _iso(at, f"message {message.get('uuid')!r}'s created_at")
    item: dict[str, Any] = {"source": "claude", "id": message.get("uuid")}
    if tools:
        item["tools"] = tools
    return ChatMessage(role=role, content=_cut(text), created_at=when, item=_item(item))


def _claude(conversation: dict[str, Any]) -> ChatConversation:
    started = _iso(conversation.get("created_at"), "its created_at")
    raw = conversation.get("chat_messages")
    if not isinstance(raw, list):
        raise ValueError("its chat_messages is missing or not a list")
    messages: list[ChatMessage] = []
    for message in raw:
        kept = _claude_message(message, messages[-1].created_at if messages else started)
        if kept is not None:
            messages.append(kept)
    title = conversation.get("name")
    return ChatConversation(
        _session_id("claude", conversation.get("uuid")),
        title if isinstance(title, str) else "",
        started,
        messages,
    )


# --- the file -----------------------------------------------------------------------------


def parse_chat_export(data: Any, source: Source) -> list[ChatConversation]:
    """The conversations of an export's parsed JSON, in the file's order;
    ``ChatExportError`` naming the first malformed one."""
    if source not in ("chatgpt", "claude"):
        raise ChatExportError(f"unknown export format {source!r}: chatgpt or claude")
    if not isinstance(data, list):
        raise ChatExportError(
            f"a {source} conversations.json is a JSON array of conversations, "
            f"not {type(data).__name__}"
        )
    found: list[ChatConversation] = []
    seen: dict[str, int] = {}
    for place, conversation in enumerate(data, start=1):
        if not isinstance(conversation, dict):
            raise ChatExportError(
                f"conversation {place} is {type(conversation).__name__}, not an object"
            )
        try:
            parsed = _chatgpt(conversation) if source == "chatgpt" else _claude(conversation)
        except ValueError as exc:
            raise ChatExportError(
                f"{_named(conversation, place)}: {exc}; nothing was imported"
            ) from exc
        if parsed.session_id in seen:
            raise ChatExportError(
                f"{_named(conversation, place)}: its id is also conversation "
                f"{seen[parsed.session_id]}'s; nothing was imported"
            )
        seen[parsed.session_id] = place
        found.append(parsed)
    return found


def _named(conversation: dict[str, Any], place: int) -> str:
    raw = conversation.get("id") or conversation.get("conversation_id") or conversation.get("uuid")
    title = conversation.get("title") or conversation.get("name")
    return f"conversation {place} (id {raw!r}, title {title!r})"


def read_chat_export(path: Path, source: Source) -> list[ChatConversation]:
    """``parse_chat_export`` of the file at ``path``; ``ChatExportError`` for a file that is not
    JSON (with the line and column)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ChatExportError(f"{path} is not UTF-8 text: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ChatExportError(f"{path} is not JSON: {exc}") from exc
    return parse_chat_export(data, source)


def session_pages(
    conversation: ChatConversation, actor_id: str, *, extract: bool, expires_at: datetime
) -> Iterator[dict[str, Any]]:
    """The bodies of ``PUT .../import/sessions/{id}`` for ``conversation``: its state with
    pages of 200 messages (sequence numbers from 1)."""
    count = len(conversation.messages)
    state = {
        "actor_id": actor_id,
        "message_count": count,
        "created_at": min(conversation.created_at, conversation.last_event_at).isoformat(),
        "last_event_at": conversation.last_event_at.isoformat(),
        "expires_at": expires_at.isoformat(),
        "read_seq": 0 if extract else count,
    }
    for start in range(0, count, PAGE):
        page = []
        for seq, message in enumerate(conversation.messages[start : start + PAGE], start=start + 1):
            entry: dict[str, Any] = {
                "seq": seq,
                "role": message.role,
                "content": message.content,
                "created_at": message.created_at.isoformat(),
            }
            if message.name is not None:
                entry["name"] = message.name
            if message.item is not None:
                entry["item"] = message.item
            page.append(entry)
        yield {**state, "messages": page}


@dataclass
class ChatImported:
    """What ``import_chat`` did: sessions written, messages new to the store, and the
    conversations left out for having no message with text."""

    sessions: int = 0
    messages: int = 0
    messages_added: int = 0
    empty: list[str] = field(default_factory=list)


def import_chat(
    store: StoreClient,
    conversations: Sequence[ChatConversation],
    actor_id: str,
    *,
    extract: bool = True,
    progress: Callable[[ChatConversation], None] | None = None,
) -> ChatImported:
    """Import ``conversations`` into ``store`` as sessions of ``actor_id`` (idempotent: a
    conversation imported again adds nothing). Each session lives the store's
    ``session_ttl_seconds`` from now. ``progress`` is called after each conversation. Errors:
    the client's (a store that does not exist: ``NotFoundError``)."""
    if not isinstance(actor_id, str) or not actor_id:
        raise ValueError("actor_id must be a non-empty string")
    settings = store.client.get_store(store.instance_id, store.name)
    expires_at = datetime.now(UTC) + timedelta(seconds=settings.session_ttl_seconds)
    done = ChatImported()
    for conversation in conversations:
        if not conversation.messages:
            done.empty.append(conversation.session_id)
        else:
            for body in session_pages(
                conversation, actor_id, extract=extract, expires_at=expires_at
            ):
                answer = store.import_session(conversation.session_id, body)
                done.messages_added += answer.messages_added
            done.sessions += 1
            done.messages += len(conversation.messages)
        if progress is not None:
            progress(conversation)
    return done


__all__ = [
    "ChatConversation",
    "ChatExportError",
    "ChatImported",
    "ChatMessage",
    "import_chat",
    "parse_chat_export",
    "read_chat_export",
    "session_pages",
]
