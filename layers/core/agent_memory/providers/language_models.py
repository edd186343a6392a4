"""The language-model port: a system and a user message in, one JSON object out (DESIGN sections
4 and 5).

Background work (extraction, summarization) asks a store's language model for JSON objects such
as ``{"memories": [...]}`` or ``{"summary": "..."}``; any capable model can serve. Providers:

- ``openai``: OpenAI Chat Completions, ``POST https://api.openai.com/v1/chat/completions``
  (API reference, "Create chat completion",
  https://platform.openai.com/docs/api-reference/chat/create) with JSON mode
  (``response_format: {"type": "json_object"}``).
- ``anthropic``: Anthropic Messages, ``POST https://api.anthropic.com/v1/messages`` (API
  reference, "Messages", https://docs.anthropic.com/en/api/messages, now also served at
  https://platform.claude.com/docs/en/api/messages); it has no JSON mode, so the prompt carries
  the request for JSON and the answer is parsed leniently.
- ``custom``: any server with OpenAI's chat-completions wire shape at
  ``{base_url}/chat/completions`` (vLLM, Ollama, llama.cpp, LiteLLM, ...), checked with
  ``providers.network.check_endpoint`` at every call (and its addresses again when the call
  connects).
  It sends JSON mode until the server refuses the field, then does without it.
- ``none``: the store has no language model (``make_language_model`` returns ``None``).

Every call goes through ``providers.client.ProviderClient`` (one deadline per call, retries of 429 /
5xx with full-jitter backoff honouring ``Retry-After``), reading at most
``max_answer_bytes(max_tokens)`` bytes. ``complete_json`` asks once more when an answer is cut
off at its token limit or holds no parseable JSON object, then raises ``ModelAnswerInvalid``.
Keys travel only in request headers: never in a body, a log line, an exception message or a
``repr``. Answers and provider error texts are never logged or quoted in errors (answers may
hold user data, error texts may echo the key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from agent_memory.errors import ModelAnswerInvalid, ProviderRejected
from agent_memory.observability import logger
from agent_memory.providers.client import ProviderClient, bearer_headers, endpoint
from agent_memory.providers.json_answers import find_json_object
from agent_memory.providers.token_counts import bounded, prompt_token_bound, token_count

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header every Messages request must carry (Anthropic API reference,
"Versions", https://docs.anthropic.com/en/api/versioning)."""
DEFAULT_MAX_TOKENS = 4096
ANSWER_ENVELOPE_BYTES = 64 * 1024
"""Room in an answer for everything but the text: ids, model name, usage, finish reason."""
BYTES_PER_TOKEN = 128
"""The most one output token can take in the answer's JSON: the longest tokens of the OpenAI
and Anthropic vocabularies are runs of about 100 characters (spaces, dashes), and JSON escaping
turns a character into at most 6 bytes (``\\u4e2d``) or 12 for a pair of surrogates, so a
token of 1 to 3 such characters stays far below it."""


def max_answer_bytes(max_tokens: int) -> int:
    """The most bytes a chat answer of at most ``max_tokens`` output tokens may hold
    (``ANSWER_ENVELOPE_BYTES + BYTES_PER_TOKEN * max_tokens``: 576 KiB for 4,096 tokens); a
    larger answer is refused (``ProviderRejected``) without being read."""
    return ANSWER_ENVELOPE_BYTES + BYTES_PER_TOKEN * max_tokens


JSON_REMINDER = "Answer with a single JSON object."
"""Appended (on its own line) to the user message when neither message mentions JSON: OpenAI's
JSON mode refuses requests whose messages never say "JSON", and without JSON mode (Anthropic, a
custom server that refused ``response_format``) the words are all that asks for it."""

_OPENAI_TRUNCATED = frozenset({"length"})
# Anthropic's stop_reason values that mean the text was cut off rather than finished.
_ANTHROPIC_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


@dataclass(frozen=True)
class Completion:
    """One answer of ``LanguageModel.complete_json``.

    ``data`` is the JSON object the model answered (a dict; its contents are not checked here).
    ``input_tokens`` / ``output_tokens`` are the provider's own counts (OpenAI's
    ``usage.prompt_tokens`` / ``usage.completion_tokens``, Anthropic's ``usage.input_tokens`` /
    ``usage.output_tokens``), summed over every attempt the call made (an answer that had to be
    asked for again was billed too); 0 when the provider did not report them. Each attempt's
    counts are taken as at most what it could have used (``providers.token_counts``: input by
    the bytes sent, output by ``max_tokens``), so a provider cannot poison a store's usage.
    """

    data: dict[str, Any]
    input_tokens: int
    output_tokens: int


class LanguageModel(Protocol):
    """A chat model that answers with one JSON object."""

    def complete_json(
        self, system: str, user: str, *, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> Completion:
        """Send ``system`` and ``user`` (one turn) and return the JSON object answered.

        ``max_tokens`` caps the answer's length in tokens (the provider's own limit field).
        When neither message contains the word "JSON" (any case), a line asking for a JSON
        object is appended to ``user``.

        Raises ``ModelAnswerInvalid`` (502 ``model_answer_invalid``) when two answers in a row
        were cut off at ``max_tokens`` or held no parseable JSON object; ``ProviderRejected``
        (bad key, unknown model, input too long, an answer without the provider's shape);
        ``ProviderUnavailable`` (retries of 429 / 5xx ran out, timeouts, connection failures);
        ``EndpointRefused`` (a custom endpoint that is not https or not public).
        """
        ...


def _ask_for_json(system: str, user: str) -> tuple[str, str]:
    """``(system, user)``, with ``JSON_REMINDER`` appended to ``user`` when neither mentions
    JSON."""
    if "json" in system.lower() or "json" in user.lower():
        return system, user
    return system, f"{user}\n\n{JSON_REMINDER}" if user else JSON_REMINDER


# --------------------------------------------------------------------------------------------
# The providers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelAnswer:
    """What one provider call answered: the assistant text and whether it was cut off."""

    text: str
    truncated: bool
    stop_reason: str | None
    input_tokens: int
    output_tokens: int


class ChatModel:
    """What the chat providers share: the JSON request loop of ``complete_json``. A provider
    implements ``_call`` (one request, its answer read into a ``ModelAnswer``);
    ``providers.bedrock.BedrockChatModel`` is one outside this module."""

    def __init__(self, *, url: str, model: str, api_key: str | None, client: ProviderClient):
        self.model = model
        self._url = url
        self._api_key = api_key
        self._client = client
        self.host = urlsplit(url).hostname or "?"
        self._custom = False
        self.allow_private = False

    def _post(self, payload: dict[str, Any], headers: dict[str, str], max_tokens: int) -> object:
        """One provider call (within the client's deadline), reading at most
        ``max_answer_bytes(max_tokens)``; a custom endpoint is checked inside it."""
        return self._client.post_json(
            self._url,
            payload,
            headers=headers,
            max_bytes=max_answer_bytes(max_tokens),
            custom=self._custom,
            allow_private=self.allow_private,
        )

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, host={self.host!r})"

    def complete_json(
        self, system: str, user: str, *, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> Completion:
        """See ``LanguageModel.complete_json``. At most two answers are asked for (each call
        has ``ProviderClient``'s own retries of 429 / 5xx)."""
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        system, user = _ask_for_json(system, user)
        input_tokens = output_tokens = 0
        problem = ""
        most_input = prompt_token_bound(system, user)
        for attempt in (1, 2):
            answer = self._call(system, user, max_tokens)
            input_tokens += bounded(
                answer.input_tokens, most_input, what="input_tokens", host=self.host
            )
            output_tokens += bounded(
                answer.output_tokens, max_tokens, what="output_tokens", host=self.host
            )
            if answer.truncated:  # stop_reason is then one of our own fixed words
                problem = (
                    f"an answer cut off at its token limit (max_tokens={max_tokens}, "
                    f"stop reason '{answer.stop_reason}')"
                )
            else:
                found = find_json_object(answer.text)
                if isinstance(found, dict):
                    return Completion(found, input_tokens, output_tokens)
                problem = found
            if attempt == 1:
                logger.warning(
                    "language model %s at %s answered with %s; asking once more",
                    self.model,
                    self.host,
                    problem,
                )
        hint = (
            "raise max_tokens or send less text"
            if problem.startswith("an answer cut off")
            else "the model does not follow the request for JSON; try another model"
        )
        raise ModelAnswerInvalid(
            f"The language model {self.model} at {self.host} answered twice with {problem}; {hint}."
        )

    def _call(self, system: str, user: str, max_tokens: int) -> ModelAnswer:
        raise NotImplementedError


class _OpenAIShaped(ChatModel):
    """OpenAI's chat-completions request and answer (shared by ``openai`` and ``custom``)."""

    _max_tokens_field = "max_completion_tokens"
    _json_mode = True

    def _payload(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            self._max_tokens_field: max_tokens,
        }
        if self._json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _call(self, system: str, user: str, max_tokens: int) -> ModelAnswer:
        payload = self._payload(system, user, max_tokens)
        answer = self._post(payload, bearer_headers(self._api_key), max_tokens)
        return _read_chat_completion(answer, self.model, self.host)


class OpenAIChatModel(_OpenAIShaped):
    """OpenAI Chat Completions, ``POST {base_url}/chat/completions`` with ``Authorization:
    Bearer <key>``.

    Request (API reference, https://platform.openai.com/docs/api-reference/chat/create):
    ``{"model", "messages": [{"role": "system", ...}, {"role": "user", ...}],
    "max_completion_tokens", "response_format": {"type": "json_object"}}``.
    ``max_completion_tokens`` rather than ``max_tokens``: the reference marks ``max_tokens``
    deprecated in its favour and not compatible with the o-series reasoning models; for those
    the limit also covers hidden reasoning tokens. JSON mode requires the word "JSON" in the
    messages (see ``JSON_REMINDER``).

    Answer: ``choices[0].message.content`` is the text, ``choices[0].finish_reason == "length"``
    means it was cut off, ``usage.prompt_tokens`` / ``usage.completion_tokens`` are the counts.

    ``base_url`` is for tests only (the store settings have no base URL for ``openai``).
    """

    def __init__(
        self, api_key: str, model: str, base_url: str = OPENAI_BASE_URL, *, client: ProviderClient
    ) -> None:
        super().__init__(
            url=endpoint(base_url, "chat/completions"),
            model=model,
            api_key=api_key,
            client=client,
        )


class CustomChatModel(_OpenAIShaped):
    """An OpenAI-compatible server: ``POST {base_url}/chat/completions``, same request and
    answer as ``OpenAIChatModel``, except the length limit is sent as ``max_tokens`` (what
    compatible servers such as vLLM, Ollama and llama.cpp read; several ignore or refuse the
    newer ``max_completion_tokens``). ``Authorization: Bearer`` only when ``api_key`` is given.

    ``check_endpoint(base_url, allow_private=allow_private)`` runs at every request, inside
    the client's deadline (https and public addresses only unless ``allow_private``; the
    addresses the connection uses are checked too, see its DNS-rebinding note).

    JSON mode: ``response_format: {"type": "json_object"}`` is sent until the server answers
    HTTP 400 with an error body that names ``response_format`` anywhere
    (``ProviderRejected.mentions``: in OpenAI's ``error.message``, older vLLM's top-level
    ``message`` or any other field). Then this model drops the field for the rest of its life, logs
    a warning saying so (host only) on the logger ``agent_memory.llm``, and sends the same
    request again without it; the messages still ask for JSON and the answer is parsed with
    ``parse_json_object``.
    """

    _max_tokens_field = "max_tokens"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        allow_private: bool,
        client: ProviderClient,
    ) -> None:
        super().__init__(
            url=endpoint(base_url, "chat/completions"),
            model=model,
            api_key=api_key,
            client=client,
        )
        self.base_url = base_url
        self.allow_private = allow_private
        self._custom = True
        self._json_mode = True

    @property
    def json_mode(self) -> bool:
        """Whether requests still carry ``response_format`` (False once the server refused it)."""
        return self._json_mode

    def _call(self, system: str, user: str, max_tokens: int) -> ModelAnswer:
        try:
            return super()._call(system, user, max_tokens)
        except ProviderRejected as exc:
            refused = exc.status == 400 and "response_format" in exc.mentions
            if not (self._json_mode and refused):
                raise
        self._json_mode = False
        logger.warning(
            "the language model endpoint at %s refused response_format (JSON mode); sending "
            "requests without it from now on, so JSON is asked for only in the prompt",
            self.host,
        )
        return super()._call(system, user, max_tokens)


class AnthropicModel(ChatModel):
    """Anthropic Messages, ``POST {base_url}/messages``.

    Request (API reference, "Messages", https://docs.anthropic.com/en/api/messages): headers
    ``x-api-key: <key>``, ``anthropic-version: 2023-06-01``, ``content-type: application/json``;
    body ``{"model", "max_tokens", "system", "messages": [{"role": "user", "content": user}]}``
    (``system`` left out when empty). There is no JSON mode: the messages ask for JSON.

    Answer: the text is the concatenation of the ``content`` blocks of type ``text`` (other
    blocks, such as ``thinking``, are ignored); ``stop_reason`` ``max_tokens`` (or
    ``model_context_window_exceeded``) means it was cut off; ``usage.input_tokens`` /
    ``usage.output_tokens`` are the counts. Errors come as ``{"type": "error", "error": {"type",
    "message"}}`` and 529 ``overloaded_error`` is retried like any 5xx.

    ``base_url`` is for tests only.
    """

    def __init__(
        self,
        api_key: str,
        model: str,
        base_url: str = ANTHROPIC_BASE_URL,
        *,
        client: ProviderClient,
    ) -> None:
        super().__init__(
            url=endpoint(base_url, "messages"), model=model, api_key=api_key, client=client
        )

    def _call(self, system: str, user: str, max_tokens: int) -> ModelAnswer:
        payload: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens}
        if system:
            payload["system"] = system
        payload["messages"] = [{"role": "user", "content": user}]
        headers = {
            "x-api-key": self._api_key or "",
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "application/json",
        }
        answer = self._post(payload, headers, max_tokens)
        return _read_message(answer, self.model, self.host)


# --------------------------------------------------------------------------------------------
# Reading answers
# --------------------------------------------------------------------------------------------


def unusable_answer(model: str, host: str, problem: str) -> ProviderRejected:
    """The error of an answer without the provider's shape (``problem`` is our own words)."""
    return ProviderRejected(f"The language model {model} at {host} {problem}.")


def _read_chat_completion(answer: object, model: str, host: str) -> ModelAnswer:
    """The text, finish reason and usage of an OpenAI chat-completion object."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise unusable_answer(model, host, "answered without a 'choices' list")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise unusable_answer(model, host, "answered without a 'message' in its first choice")
    content = message.get("content")
    text = content if isinstance(content, str) else ""  # null when the model refused
    finish = choices[0].get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    return ModelAnswer(
        text=text,
        truncated=finish in _OPENAI_TRUNCATED,
        stop_reason=finish,
        input_tokens=token_count(usage, "prompt_tokens"),
        output_tokens=token_count(usage, "completion_tokens"),
    )


def _read_message(answer: object, model: str, host: str) -> ModelAnswer:
    """The text, stop reason and usage of an Anthropic Message object."""
    content = answer.get("content") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or not isinstance(content, list):
        raise unusable_answer(model, host, "answered without a 'content' list")
    text = "".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )
    stop = answer.get("stop_reason")
    stop = stop if isinstance(stop, str) else None
    usage = answer.get("usage")
    return ModelAnswer(
        text=text,
        truncated=stop in _ANTHROPIC_TRUNCATED,
        stop_reason=stop,
        input_tokens=token_count(usage, "input_tokens"),
        output_tokens=token_count(usage, "output_tokens"),
    )
