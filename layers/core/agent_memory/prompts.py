"""The prompts of background work, in one place (documented in ``docs/background.md``).

The model answers JSON objects only, so any capable chat model can serve (DESIGN section 4):
extraction asks for ``{"memories": [{"text", "type", "topics"}]}`` and summarization for
``{"summary": "..."}``. Messages are shown with their sequence number, role and UTC date, so
that episodic memories can carry absolute dates ("on 2023-05-07") instead of "yesterday".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from agent_memory.models import CustomType, Message

MAX_MEMORIES_PER_RUN = 50
"""Memories one extraction call may keep; the rest of a longer answer is ignored."""
MAX_MEMORY_CHARS = 2000
"""Extracted memories longer than this are cut (the API allows 8,000 for hand-made ones; a
memory a model writes is one fact, and a very long one is usually a paraphrase of the chat)."""

EXTRACTION_SYSTEM = """\
You extract long-term memories about the user from a conversation between a user and an AI \
assistant, for an assistant that will talk to this user again later.

Keep only what will still matter in later conversations: facts about the user and the people, \
places and things in their life; their preferences, plans and goals; and events that happened \
to them. Write each memory as one short, self-contained sentence in the third person that names \
who it is about (use the speaker's name when the conversation gives it, otherwise "The user"). \
Give every event its absolute date (for example "on 7 May 2023"), computed from the dates of \
the messages; never write relative dates such as "yesterday" or "last week". Do not keep \
greetings, small talk, the assistant's own suggestions, or anything only the assistant said \
unless the user confirmed it. Do not repeat what the summary of earlier messages already says \
unless the new messages change it. If nothing is worth keeping, return an empty list.

Memory types:
{types}

Answer with one JSON object and nothing else, in this form:
{{"memories": [{{"text": "...", "type": "<one of the types above>", "topics": ["..."]}}]}}
"topics" are one to three short lower-case keywords."""

EXTRACTION_USER = """\
{summary_block}New messages (number, role, date in UTC):
{messages}

Extract the memories worth keeping from the new messages, as a JSON object."""

SUMMARY_SYSTEM = """\
You maintain the running summary of a long conversation between a user and an AI assistant. \
You are given the current summary (possibly empty) and the next messages, which are about to \
be removed from the conversation. Write a new summary that keeps everything the current \
summary says that still matters and adds what the removed messages contribute: facts, \
decisions, open questions, commitments, names, numbers and dates (as absolute dates). Write \
plain prose in the third person, at most {max_words} words.

Answer with one JSON object and nothing else: {{"summary": "..."}}"""

SUMMARY_USER = """\
Current summary:
{summary}

Messages to fold into the summary (number, role, date in UTC):
{messages}

Write the new summary as a JSON object."""

SUMMARY_MAX_WORDS = 400

_BUILT_IN_TYPES = (
    ("semantic", "a lasting fact or preference (who they are, what they like, what they own)"),
    ("episodic", "something that happened at a particular time, with its date"),
)


def describe_types(custom_types: Sequence[CustomType]) -> str:
    """One line per memory type the store accepts: the two built-in ones, then its own."""
    lines = [f"- {name}: {meaning}" for name, meaning in _BUILT_IN_TYPES]
    for custom in custom_types:
        description = custom.description or "a custom type of this store"
        lines.append(f"- {custom.name}: {description}")
    return "\n".join(lines)


def render_messages(messages: Sequence[Message]) -> str:
    """``[seq] role (name), YYYY-MM-DD HH:MM UTC: content``, one per message, oldest first;
    a message's further lines are indented by four spaces."""
    lines = []
    for message in messages:
        who = f"{message.role} ({message.name})" if message.name else message.role
        when = message.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        # Continuation lines are indented, so that a message cannot write a line that reads as
        # another message ("\n[99] user, ...").
        content = message.content.replace("\r\n", "\n").replace("\r", "\n")
        content = content.replace("\n", "\n    ")
        lines.append(f"[{message.seq}] {who}, {when} UTC: {content}")
    return "\n".join(lines)


def extraction_prompt(
    messages: Sequence[Message], summary: str | None, custom_types: Sequence[CustomType]
) -> tuple[str, str]:
    """``(system, user)`` for one extraction call over ``messages``."""
    summary_block = f"Summary of earlier messages:\n{summary}\n\n" if summary else ""
    return (
        EXTRACTION_SYSTEM.format(types=describe_types(custom_types)),
        EXTRACTION_USER.format(summary_block=summary_block, messages=render_messages(messages)),
    )


def summary_prompt(messages: Sequence[Message], summary: str | None) -> tuple[str, str]:
    """``(system, user)`` for folding ``messages`` into ``summary``."""
    return (
        SUMMARY_SYSTEM.format(max_words=SUMMARY_MAX_WORDS),
        SUMMARY_USER.format(summary=summary or "(empty)", messages=render_messages(messages)),
    )
