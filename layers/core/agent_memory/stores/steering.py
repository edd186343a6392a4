"""What an operator tells a store's extraction: its instructions and examples
(``extraction_instructions``, ``extraction_examples``, a custom type's ``examples``), and the
fields of an actor's profile that extraction fills (``profile_fields``). Store settings
(``stores.models.StoreSettings``), checked here field by field; names fixed by the contract
(DESIGN "Round 4 additions").

Every text here is the operator's and reaches the extraction prompt quoted (``render.quote``,
``background.prompts``), so none of it can start a section of the prompt. The limits below
bound what the steering adds to one extraction prompt: ``STEERING_MAX_CHARS`` characters
(38,480: about 9,600 tokens at the 4 characters a token of OpenAI's and Anthropic's English
tokenizers), before quoting's escapes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from agent_memory.models import SESSION_ID_PATTERN, Model, is_blank

MAX_INSTRUCTIONS_CHARS = 2000
MAX_EXAMPLES = 5
MAX_EXAMPLE_MESSAGES = 6
MAX_EXAMPLE_MESSAGE_CHARS = 500
MAX_EXAMPLE_MEMORIES = 5
MAX_EXAMPLE_MEMORY_CHARS = 300
MAX_TYPE_EXAMPLES = 3
MAX_TYPE_EXAMPLE_CHARS = 300
MAX_PROFILE_FIELDS = 20
MAX_PROFILE_FIELD_NAME_CHARS = 64
MAX_PROFILE_DESCRIPTION_CHARS = 500
STEERING_MAX_CHARS = (
    MAX_INSTRUCTIONS_CHARS
    + MAX_EXAMPLES
    * (
        MAX_EXAMPLE_MESSAGES * MAX_EXAMPLE_MESSAGE_CHARS
        + MAX_EXAMPLE_MEMORIES * MAX_EXAMPLE_MEMORY_CHARS
    )
    + 3 * MAX_TYPE_EXAMPLES * MAX_TYPE_EXAMPLE_CHARS
    + MAX_PROFILE_FIELDS * (MAX_PROFILE_FIELD_NAME_CHARS + MAX_PROFILE_DESCRIPTION_CHARS)
)
"""The most operator text the steering puts in one extraction prompt: the instructions, every
example at its limits, the three custom types' examples and the profile fields (38,480
characters, about 9,600 tokens; the prompt's other parts are bounded by
``background.prompts``)."""


def _visible(value: str) -> str:
    if is_blank(value):
        raise ValueError("must not be blank")
    return value


ExtractionInstructions = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_INSTRUCTIONS_CHARS),
    AfterValidator(_visible),
    Field(
        description="What extraction should keep and what it should leave, in the operator's "
        "words (at most 2,000 characters); shown to the model, quoted, with every extraction."
    ),
]
TypeExample = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TYPE_EXAMPLE_CHARS),
    AfterValidator(_visible),
]
ProfileFieldName = Annotated[
    str,
    StringConstraints(pattern=SESSION_ID_PATTERN, max_length=MAX_PROFILE_FIELD_NAME_CHARS),
    Field(description="Letters, digits and . _ : @ -, 1 to 64 characters."),
]
ProfileFieldType = Literal["text", "list", "number", "boolean", "date"]


class ExampleMessage(Model):
    """One message of an example conversation."""

    role: Literal["user", "assistant", "system", "tool"]
    content: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_EXAMPLE_MESSAGE_CHARS),
        AfterValidator(_visible),
    ]


class ExampleMemory(Model):
    """One memory an example conversation should give (its ``type`` one of the store's
    types)."""

    text: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_EXAMPLE_MEMORY_CHARS),
        AfterValidator(_visible),
    ]
    type: Annotated[str, StringConstraints(min_length=1, max_length=40)] = "semantic"


class ExtractionExample(Model):
    """An example for extraction: a short conversation and the memories it should give; an
    empty ``memories`` list teaches what not to keep."""

    messages: Annotated[list[ExampleMessage], Field(min_length=1, max_length=MAX_EXAMPLE_MESSAGES)]
    memories: Annotated[list[ExampleMemory], Field(max_length=MAX_EXAMPLE_MEMORIES)]


ExtractionExamples = Annotated[
    list[ExtractionExample],
    Field(
        max_length=MAX_EXAMPLES,
        description="Up to 5 example conversations with the memories each should give "
        "(an empty list of memories teaches what not to keep).",
    ),
]


class ProfileField(Model):
    """A field of an actor's profile: its ``name``, what it holds (``description``, shown to
    extraction), and its ``type``: ``text`` (a string), ``list`` (strings), ``number``,
    ``boolean`` or ``date`` (``YYYY-MM-DD``)."""

    name: ProfileFieldName
    description: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_PROFILE_DESCRIPTION_CHARS),
        AfterValidator(_visible),
    ]
    type: ProfileFieldType = "text"


ProfileFields = Annotated[
    list[ProfileField],
    Field(
        max_length=MAX_PROFILE_FIELDS,
        description="Up to 20 fields of an actor's profile, which extraction fills from the "
        "same model call and GET .../actors/{actor}/profile reads.",
    ),
]
