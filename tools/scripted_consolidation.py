"""The scripted model's consolidation rule (``tools.scripted_model``): the plan a model would
give for one related set of memories (``agent_memory.background.prompts.consolidation_prompt``),
by rule, so that the local stack and the tests run the real path of a consolidation run.

The rule merges the memories it can tell state the same fact: the same sentence once
lower-cased, its spaces made one and its end punctuation left out ("<who> said on <date>: "
of the scripted extraction's memories left out too), or word sets (words of three letters or
more) overlapping by at least ``SAME_WORDS`` (Jaccard). Each group of two or more becomes one
``merge`` step whose text is the group's longest. It never updates or drops: deciding that a
fact is stale or trivia is a judgement by meaning, which a rule cannot make.
"""

from __future__ import annotations

import json
import re
from typing import Any

KNOWN = re.compile(
    r'^\[(mem_[0-9a-f]{20})\] [a-z_]+(?:, happened [\d-]+)?, kept [\d-]+: ("(?:[^"\\]|\\.)*")'
)
SAID = re.compile(r"^.{1,200}? said on \d{4}-\d{2}-\d{2}: ")
WORD = re.compile(r"\w{3,}")
SAME_WORDS = 0.8
"""Word-set overlap (Jaccard) at or above which two memories state the same fact."""
HEADING = "You tidy the long-term memories"
"""How the rule knows a consolidation prompt (the start of its system prompt)."""


def shown(user_prompt: str) -> list[tuple[str, str]]:
    """``(id, text)`` of each memory line of a consolidation prompt, in order."""
    found = []
    for line in user_prompt.split("\n"):
        match = KNOWN.match(line)
        if match:
            text, _ = json.JSONDecoder().raw_decode(match.group(2))
            found.append((match.group(1), str(text)))
    return found


def _key(text: str) -> str:
    return " ".join(SAID.sub("", text, count=1).lower().split()).rstrip(".!?")


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in WORD.findall(SAID.sub("", text, count=1)))


def same_fact(a: str, b: str) -> bool:
    """Whether the rule takes ``a`` and ``b`` for the same fact (module docstring)."""
    if _key(a) == _key(b):
        return True
    wa, wb = _words(a), _words(b)
    union = len(wa | wb)
    return bool(union) and len(wa & wb) / union >= SAME_WORDS


def plan(user_prompt: str) -> dict[str, Any]:
    """``{"plan": [{"action": "merge", "memories": [ids], "text", "reason"}]}`` for the
    memories of ``user_prompt`` (empty when none are the same fact)."""
    memories = shown(user_prompt)
    groups: list[list[tuple[str, str]]] = []
    for memory_id, text in memories:
        for group in groups:
            if same_fact(group[0][1], text):
                group.append((memory_id, text))
                break
        else:
            groups.append([(memory_id, text)])
    steps = [
        {
            "action": "merge",
            "memories": [i for i, _ in group],
            "text": max((t for _, t in group), key=len),
            "reason": "the same fact, said more than once",
        }
        for group in groups
        if len(group) > 1
    ]
    return {"plan": steps}
