"""What a provider may say it used: every token count a provider reports is taken as at most
what the request could have used, so a provider (a store's own custom endpoint, above all)
cannot make a store, or its organization, look as if it spent more than it sent.

A custom model that answered ``usage.prompt_tokens`` 9.2e18 once used up its organization's
``model_tokens_per_day`` in one call, refusing every other store of the organization until
midnight UTC; one above 2^63 made the background run raise when it counted (issue 32). The
bounds:

- Input (prompt) tokens: at most ``PROMPT_TOKENS_PER_BYTE`` per UTF-8 byte of the texts sent,
  plus ``PROMPT_OVERHEAD_TOKENS`` per request. The tokenizers of the providers we call are
  byte-level BPE (OpenAI's ``tiktoken`` encodings, Anthropic's, Llama 3's) or SentencePiece
  with byte fallback (Mistral, Gemma, older Llama): every token covers at least one byte of the
  text, so a text of n bytes is at most n tokens. The overhead covers what a chat template adds
  around the messages (role markers, a few tokens per message) and a provider's own system
  text (a server's JSON-mode or tool instructions).
- Output (completion) tokens: at most ``max_tokens`` of the request (the limit every provider
  is sent; hidden reasoning tokens count within it for OpenAI's and Anthropic's models).
- Embedding tokens: at most one per UTF-8 byte of the texts of the batch plus
  ``EMBED_OVERHEAD_TOKENS`` per text (a start and an end token).

A count above its bound is taken as the bound and logged once per call (provider host only,
never the texts); a count that is not a non-negative integer is 0 (``token_count``).
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_memory.observability import logger

PROMPT_TOKENS_PER_BYTE = 1
"""The most prompt tokens one UTF-8 byte of the texts sent can make (module docstring)."""
PROMPT_OVERHEAD_TOKENS = 1_000
"""Prompt tokens a request may add to its texts: a chat template's markers, a provider's own
system text."""
EMBED_OVERHEAD_TOKENS = 8
"""Tokens an embedding model may add to each text (start and end markers)."""


def text_bytes(texts: Iterable[str]) -> int:
    """The UTF-8 bytes of ``texts`` together (a lone surrogate counts as the 3 bytes it would
    take escaped)."""
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)


def prompt_token_bound(*texts: str) -> int:
    """The most prompt tokens a request sending ``texts`` may use."""
    return PROMPT_TOKENS_PER_BYTE * text_bytes(texts) + PROMPT_OVERHEAD_TOKENS


def embed_token_bound(texts: Iterable[str]) -> int:
    """The most tokens an embedding request of ``texts`` may use."""
    items = list(texts)
    return text_bytes(items) + EMBED_OVERHEAD_TOKENS * len(items)


def token_count(usage: object, name: str) -> int:
    """A token count from a ``usage`` object (``usage[name]``): a non-negative integer, else
    0 (a float such as 9.2e18, a string, a boolean, a negative number)."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def bounded(count: int, most: int, *, what: str, host: str) -> int:
    """``count`` when it is at most ``most``, else ``most`` (logged as a warning naming
    ``what`` and the provider's ``host``: a provider that reports more than it could have
    used)."""
    if count <= most:
        return max(0, count)
    logger.warning(
        "a provider reported more tokens than the request could use; counting the most it could",
        extra={"provider_host": host, "counted": what, "most": most},
    )
    return most
