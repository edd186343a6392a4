"""The bases and shared literal types of the client's models (``models``, ``transfer_models``):
what a request body and an answer are to the client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Role = Literal["user", "assistant", "system", "tool"]
"""Who wrote a message."""
SearchMode = Literal["semantic", "keyword", "hybrid"]
"""How a search ranks memories: by meaning (cosine), by keyword (BM25), or both."""
LlmProvider = Literal["none", "openai", "anthropic", "bedrock", "custom"]
RerankProvider = Literal["none", "cohere", "voyage", "jina", "bedrock", "custom", "llm"]
EmbedProvider = Literal["none", "openai", "bedrock", "custom"]
ExtractionState = Literal["idle", "waiting", "running", "failed"]


class Request(BaseModel):
    """Base of request bodies: unknown fields are errors; values are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if isinstance(value, list) and len(value) > 8:
                yield name, f"<{len(value)} items>"  # a 1,536-float vector is no use in a repr
            else:
                yield name, value


class Answer(BaseModel):
    """Base of answers: fields a newer server adds are ignored."""

    model_config = ConfigDict(extra="ignore")
