"""ChatGPT and Claude data exports built from real LoCoMo conversations (read at test time from
``../shared/data``, never copied), in the shapes ``kividb_memory.chat_export`` documents, and
malformed variants of them. Speaker A is the user; each LoCoMo session one conversation, its
turns 30 s apart from the session's date. The ChatGPT ones hold what an export holds beyond
plain turns: a hidden empty system message at the root, an edited prompt's abandoned branch,
a tool's message (``python``) and an image part; the Claude ones a tool use with its result and
an attachment."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tools.replay import DEFAULT_FILES, LOCOMO_DATE_FORMAT, locomo_turn_content

ABANDONED = "This edited prompt was abandoned for another branch"


def locomo_sessions(sample_id: str = "conv-26", count: int = 3) -> list[dict[str, Any]]:
    """The first ``count`` sessions of a LoCoMo sample: ``{"id", "start", "turns": [(role,
    text, time)]}``, speaker A as ``user``."""
    data = json.loads(DEFAULT_FILES["locomo"].read_text(encoding="utf-8"))
    convo = next(s for s in data if s["sample_id"] == sample_id)["conversation"]
    found = []
    for n in range(1, count + 1):
        start = datetime.strptime(convo[f"session_{n}_date_time"], LOCOMO_DATE_FORMAT)
        start = start.replace(tzinfo=UTC)
        turns = [
            (
                "user" if turn["speaker"] == convo["speaker_a"] else "assistant",
                locomo_turn_content(turn),
                start + timedelta(seconds=30 * i),
            )
            for i, turn in enumerate(convo[f"session_{n}"])
        ]
        found.append({"id": f"{sample_id}-s{n}", "start": start, "turns": turns})
    return found


def _node(node_id: str, parent: str | None, message: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": [], "message": message}


def _gpt_message(node_id: str, role: str, parts: list[Any], at: float | None, **more: Any):
    return {
        "id": node_id,
        "author": {"role": role, "name": more.pop("name", None), "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": {"content_type": more.pop("content_type", "text"), "parts": parts},
        "status": "finished_successfully",
        "weight": 1.0,
        "metadata": {},
        "recipient": more.pop("recipient", "all"),
        **more,
    }


def chatgpt_export(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ChatGPT ``conversations.json`` of ``sessions``."""
    export = []
    for session in sessions:
        mapping: dict[str, Any] = {"root": _node("root", None, None)}
        hidden = _gpt_message("sys", "system", [""], None)
        mapping["sys"] = _node("sys", "root", hidden)
        parent = "sys"
        for i, (role, text, at) in enumerate(session["turns"]):
            node_id = f"m{i}"
            mapping[node_id] = _node(
                node_id, parent, _gpt_message(node_id, role, [text], at.timestamp())
            )
            mapping[parent]["children"].append(node_id)
            if i == 1:  # an edit of the first answer's prompt, left on a branch of its own
                mapping["edit"] = _node(
                    "edit", parent, _gpt_message("edit", "user", [ABANDONED], at.timestamp())
                )
                mapping[parent]["children"].append("edit")
            parent = node_id
        end = session["turns"][-1][2].timestamp()
        extra = [
            (
                "tool",
                _gpt_message(
                    "tool", "tool", ["42"], end + 1, name="python", content_type="execution_output"
                ),
            ),
            (
                "img",
                _gpt_message(
                    "img",
                    "user",
                    [
                        {
                            "content_type": "image_asset_pointer",
                            "asset_pointer": "file-service://x",
                        },
                        "and this photo",
                    ],
                    end + 2,
                    content_type="multimodal_text",
                ),
            ),
        ]
        for node_id, message in extra:
            if message["content"]["content_type"] == "execution_output":
                message["content"] = {"content_type": "execution_output", "text": "42"}
            mapping[node_id] = _node(node_id, parent, message)
            mapping[parent]["children"].append(node_id)
            parent = node_id
        export.append(
            {
                "title": f"LoCoMo {session['id']}",
                "create_time": session["start"].timestamp(),
                "update_time": end + 2,
                "mapping": mapping,
                "current_node": parent,
                "id": f"{session['id']}-gpt",
                "conversation_id": f"{session['id']}-gpt",
                "default_model_slug": "gpt-4o",
            }
        )
    return export


def claude_export(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Claude ``conversations.json`` of ``sessions``."""
    export = []
    for session in sessions:
        messages = []
        for i, (role, text, at) in enumerate(session["turns"]):
            stamp = at.isoformat().replace("+00:00", "Z")
            messages.append(
                {
                    "uuid": f"{session['id']}-{i}",
                    "text": text,
                    "content": [{"type": "text", "text": text}],
                    "sender": "human" if role == "user" else "assistant",
                    "created_at": stamp,
                    "updated_at": stamp,
                    "attachments": [],
                    "files": [],
                }
            )
        end = session["turns"][-1][2] + timedelta(seconds=1)
        messages.append(
            {
                "uuid": f"{session['id']}-tool",
                "text": "",
                "content": [
                    {"type": "text", "text": "Let me look that up."},
                    {
                        "type": "tool_use",
                        "name": "web_search",
                        "input": {"query": "LGBTQ support group"},
                    },
                    {
                        "type": "tool_result",
                        "name": "web_search",
                        "content": [{"type": "text", "text": "3 results"}],
                    },
                ],
                "sender": "assistant",
                "created_at": end.isoformat().replace("+00:00", "Z"),
                "attachments": [{"file_name": "notes.txt", "extracted_content": "private notes"}],
                "files": [],
            }
        )
        export.append(
            {
                "uuid": f"{session['id']}-claude",
                "name": f"LoCoMo {session['id']}",
                "created_at": session["start"].isoformat().replace("+00:00", "Z"),
                "updated_at": end.isoformat().replace("+00:00", "Z"),
                "chat_messages": messages,
            }
        )
    return export


def malformed(export: list[dict[str, Any]], source: str, how: str) -> list[dict[str, Any]]:
    """``export`` with its second conversation broken ``how``."""
    broken = copy.deepcopy(export)
    bad = broken[1]
    if source == "chatgpt":
        if how == "no mapping":
            del bad["mapping"]
        elif how == "missing node":
            bad["current_node"] = "nowhere"
        elif how == "loop":
            bad["mapping"]["root"]["parent"] = bad["current_node"]
        elif how == "role":
            bad["mapping"]["m0"]["message"]["author"]["role"] = "critic"
        elif how == "time":
            bad["create_time"] = "yesterday"
    else:
        if how == "sender":
            bad["chat_messages"][0]["sender"] = "robot"
        elif how == "time":
            bad["chat_messages"][2]["created_at"] = "yesterday"
        elif how == "messages":
            bad["chat_messages"] = {"not": "a list"}
        elif how == "no id":
            bad["uuid"] = ""
    return broken
