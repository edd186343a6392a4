"""The steering's token budget: a store with every steering setting at its limits adds at most
``STEERING_MAX_CHARS`` of its own text to the extraction system prompt, plus our headings,
labels and quotes, about 10,500 tokens in all (docs/background.md, "Steering extraction")."""

from __future__ import annotations

from agent_memory.background.prompts import Steering, describe_types, extraction_prompt
from agent_memory.stores import steering as limits
from agent_memory.stores.models import CustomType
from agent_memory.stores.steering import ExtractionExample, ProfileField

BUDGET_TOKENS = 10_500
"""What docs/background.md states the steering can add, at 4 characters a token."""


def _at_limits() -> tuple[Steering, list[CustomType]]:
    text = lambda n: "x" * n  # noqa: E731 - ASCII: no escapes, the plain budget
    examples = [
        ExtractionExample.model_validate(
            {
                "messages": [
                    {"role": "user", "content": text(limits.MAX_EXAMPLE_MESSAGE_CHARS)}
                    for _ in range(limits.MAX_EXAMPLE_MESSAGES)
                ],
                "memories": [
                    {"text": text(limits.MAX_EXAMPLE_MEMORY_CHARS), "type": "semantic"}
                    for _ in range(limits.MAX_EXAMPLE_MEMORIES)
                ],
            }
        )
        for _ in range(limits.MAX_EXAMPLES)
    ]
    fields = [
        ProfileField.model_validate(
            {
                "name": f"f{n:02d}" + "y" * (limits.MAX_PROFILE_FIELD_NAME_CHARS - 3),
                "description": text(limits.MAX_PROFILE_DESCRIPTION_CHARS),
                "type": "list",
            }
        )
        for n in range(limits.MAX_PROFILE_FIELDS)
    ]
    types = [
        CustomType.model_validate(
            {
                "name": f"type_{n}",
                "description": "d",
                "examples": [text(limits.MAX_TYPE_EXAMPLE_CHARS)] * limits.MAX_TYPE_EXAMPLES,
            }
        )
        for n in range(3)
    ]
    steering = Steering(text(limits.MAX_INSTRUCTIONS_CHARS), examples, fields)
    return steering, types


def test_the_steering_at_its_limits_stays_within_its_stated_budget():
    steering, types = _at_limits()
    plain, _ = extraction_prompt([], None, [])
    steered, _ = extraction_prompt([], None, types, steering=steering)
    added = len(steered) - len(plain)
    type_text = len(describe_types(types)) - len(describe_types([]))
    assert limits.STEERING_MAX_CHARS == 38_480  # the figure the docs give
    assert added > limits.STEERING_MAX_CHARS  # all of it is there, with our labels around it
    assert added / 4 <= BUDGET_TOKENS, added
    assert type_text >= 3 * limits.MAX_TYPE_EXAMPLES * limits.MAX_TYPE_EXAMPLE_CHARS
