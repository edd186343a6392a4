"""A loopback stand-in for Amazon Bedrock: its wire formats, its signature check, scripted
answers. For trying the ``bedrock`` providers locally and for the tests.

``python -m tools.bedrock_standin [--port 8766] [--region us-east-1]`` serves, at
``http://127.0.0.1:PORT``, what ``agent_memory.providers.bedrock`` calls:

- ``POST /model/{modelId}/converse`` (Bedrock Runtime ``Converse``): the answer of
  ``tools.scripted_model.ScriptedModel`` to the same system and user text (extraction or
  summarization by rule), as ``{"output": {"message": {"role": "assistant", "content":
  [{"text"}]}}, "stopReason": "end_turn", "usage": {...}, "metrics": {...}}``;
- ``POST /model/{modelId}/invoke`` (``InvokeModel``) for embedding models: Titan Text Embeddings
  V2 (``inputText``, ``dimensions`` 256, 512 or 1024, else 400 ``ValidationException``), Titan
  V1 (1,536 values) and Cohere Embed (``texts`` up to 96, ``input_type`` required,
  ``embedding_types`` answered as ``{"float": [...]}``), vectors from
  ``tools.scripted_model.embed`` (texts sharing words are close);
- ``POST /rerank`` (Bedrock Agent Runtime ``Rerank``): ``{"results": [{"index",
  "relevanceScore"}]}`` ordered by the share of the query's words each source holds.

Every request must be signed with AWS Signature Version 4 for the server's region and the
service ``bedrock`` by the credentials it was given (the command line takes them from
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``, the variables the
local stack signs with); ``tools.sigv4_check`` checks it and a request that fails is answered
403 with Bedrock's error shape (``{"message"}`` and ``x-amzn-ErrorType``). Errors of shape are
400 ``ValidationException``. ``GET /stats`` counts requests by action and refusals.

Tests script answers ahead (``fail``, ``garbage``, ``reply``; ``delay`` for every answer) and
read ``requests`` (``Seen``: action, path as received, lower-case headers, body, whether its
signature passed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from tools.scripted_model import WORD, ScriptedModel, embed, overlap
from tools.sigv4_check import AwsCredentials, check_signature

ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_MODEL_PATH = re.compile(r"^/model/([^/]+)/(converse|invoke)$")
TITAN_V2_SIZES = (256, 512, 1024)
Answer = tuple[int, dict[str, str], dict[str, Any] | list[Any]]


@dataclass(frozen=True)
class Seen:
    """One request received: ``action`` (``converse``, ``invoke``, ``rerank`` or ``?``), the
    raw ``path``, lower-case ``headers``, the parsed ``body`` and whether ``signed`` passed."""

    action: str
    path: str
    headers: dict[str, str]
    body: Any
    signed: bool


@dataclass
class _Scripted:
    status: int
    headers: dict[str, str]
    body: Any
    delay: float = 0.0
    action: str | None = None  # answers only this action; any when None


@dataclass
class BedrockStandIn:
    """The stand-in's state: expected credentials and region, scripted answers, what it saw."""

    credentials: AwsCredentials
    region: str = "us-east-1"
    model: ScriptedModel = field(default_factory=ScriptedModel)
    requests: list[Seen] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    delay: float = 0.0
    responder: Callable[[str, str], str] | None = None
    """Builds the Converse text from ``(system, user)``; the scripted model's rule when None."""
    _queue: list[_Scripted] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- scripting -----------------------------------------------------------------------

    def fail(
        self,
        status: int,
        error_type: str,
        *,
        retry_after: str | None = None,
        delay: float = 0.0,
        action: str | None = None,
    ) -> None:
        """Answer the next request (of ``action`` when given: ``converse``, ``invoke``,
        ``rerank``) ``status`` with Bedrock's error shape: ``{"message"}`` and
        ``x-amzn-ErrorType: <error_type>:...`` (``ThrottlingException`` for 429)."""
        headers = {"x-amzn-ErrorType": f"{error_type}:{ERROR_NAMESPACE}"}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        body = {"message": f"scripted {error_type} AKIA-should-never-be-quoted"}
        self._push(_Scripted(status, headers, body, delay, action))

    def garbage(self, body: Any, *, delay: float = 0.0) -> None:
        """Answer the next request 200 with exactly ``body``."""
        self._push(_Scripted(200, {}, body, delay))

    def reply(self, text: str, *, stop_reason: str = "end_turn") -> None:
        """Answer the next Converse request with ``text`` and ``stop_reason``
        (``max_tokens``: cut off)."""
        self._push(_Scripted(200, {}, converse_answer(text, stop_reason, 10, len(text)), 0.0))

    def _push(self, scripted: _Scripted) -> None:
        with self._lock:
            self._queue.append(scripted)

    # ---- answering -----------------------------------------------------------------------

    def answer(
        self, method: str, raw_target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[Answer, float]:
        """The answer to one request and the seconds to wait before sending it."""
        path = raw_target.partition("?")[0]
        matched = _MODEL_PATH.match(path)
        action = matched[2] if matched else ("rerank" if path == "/rerank" else "?")
        refusal = check_signature(
            method, raw_target, headers, raw, self.credentials, region=self.region
        )
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Seen(action, raw_target, headers, body, refusal is None))
            self.counts[action if refusal is None else "refused"] += 1
        if refusal is not None:
            return error(403, refusal.error_type, refusal.message), 0.0
        with self._lock:
            scripted = next((s for s in self._queue if s.action in (None, action)), None)
            if scripted is not None:
                self._queue.remove(scripted)
        if scripted is not None:
            return (scripted.status, scripted.headers, scripted.body), scripted.delay
        if not isinstance(body, dict):
            return error(400, "ValidationException", "The body is not a JSON object."), 0.0
        if action == "converse" and matched:
            return self._converse(body), self.delay
        if action == "invoke" and matched:
            return self._invoke(unquote(matched[1]), body), self.delay
        if action == "rerank":
            return self._rerank(body), self.delay
        return error(404, "UnknownOperationException", "No such operation."), 0.0

    def _converse(self, body: dict[str, Any]) -> Answer:
        messages = body.get("messages")
        config = body.get("inferenceConfig") or {}
        if not isinstance(messages, list) or not messages:
            return error(400, "ValidationException", "messages is required.")
        user = _texts(messages[-1].get("content") if isinstance(messages[-1], dict) else None)
        system = _texts(body.get("system"))
        if "maxTokens" in config and not (
            isinstance(config["maxTokens"], int) and config["maxTokens"] >= 1
        ):
            return error(400, "ValidationException", "inferenceConfig.maxTokens must be >= 1.")
        if self.responder is not None:
            text = self.responder(system, user)
        else:
            chat = self.model.chat(
                {
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ]
                }
            )
            text = chat["choices"][0]["message"]["content"]
        return (
            200,
            {},
            converse_answer(
                text, "end_turn", len(WORD.findall(system + user)), len(WORD.findall(text))
            ),
        )

    def _invoke(self, model: str, body: dict[str, Any]) -> Answer:
        if model.startswith("amazon.titan-embed-text"):
            text = body.get("inputText")
            if not isinstance(text, str) or not text:
                return error(400, "ValidationException", "inputText is required.")
            size = 1536
            if model.startswith("amazon.titan-embed-text-v2"):
                size = body.get("dimensions", 1024)
                if size not in TITAN_V2_SIZES:
                    return error(400, "ValidationException", "dimensions must be 256, 512 or 1024.")
            self.model.count("embed")
            return (
                200,
                {},
                {"embedding": embed(text, size), "inputTextTokenCount": len(WORD.findall(text))},
            )
        if model.startswith("cohere.embed"):
            texts = body.get("texts")
            if not isinstance(texts, list) or not 1 <= len(texts) <= 96:
                return error(400, "ValidationException", "texts must hold 1 to 96 texts.")
            if body.get("input_type") not in (
                "search_document",
                "search_query",
                "classification",
                "clustering",
            ):
                return error(400, "ValidationException", "input_type is required.")
            size = body.get("output_dimension", 1536 if "v4" in model else 1024)
            vectors = [embed(str(t), size) for t in texts]
            self.model.count("embed")
            embeddings: Any = {"float": vectors} if body.get("embedding_types") else vectors
            return (
                200,
                {},
                {
                    "id": "standin",
                    "embeddings": embeddings,
                    "texts": texts,
                    "response_type": "embeddings_by_type",
                },
            )
        return error(400, "ValidationException", "The provided model identifier is invalid.")

    def _rerank(self, body: dict[str, Any]) -> Answer:
        try:
            query = body["queries"][0]["textQuery"]["text"]
            texts = [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]]
            config = body["rerankingConfiguration"]["bedrockRerankingConfiguration"]
            arn = config["modelConfiguration"]["modelArn"]
            wanted = config.get("numberOfResults", len(texts))
        except (KeyError, IndexError, TypeError):
            return error(400, "ValidationException", "The rerank request is malformed.")
        if not isinstance(arn, str) or not arn.startswith("arn:aws"):
            return error(400, "ValidationException", "modelArn must be a model ARN.")
        if not isinstance(wanted, int) or not 1 <= wanted <= len(texts):
            return error(400, "ValidationException", "numberOfResults is out of range.")
        self.counts["rerank-documents"] += len(texts)
        scored = sorted(
            ((i, overlap(query, text)) for i, text in enumerate(texts)),
            key=lambda p: (-p[1], p[0]),
        )[:wanted]
        return 200, {}, {"results": [{"index": i, "relevanceScore": s} for i, s in scored]}


def _texts(blocks: object) -> str:
    """The text of a list of Converse content blocks (``[{"text": ...}]``), joined."""
    if not isinstance(blocks, list):
        return ""
    return "".join(
        b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
    )


def converse_answer(
    text: str, stop_reason: str, input_tokens: int, output_tokens: int
) -> dict[str, Any]:
    """A Converse answer holding ``text``."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop_reason,
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        },
        "metrics": {"latencyMs": 1},
    }


def error(status: int, error_type: str, message: str) -> Answer:
    """Bedrock's error answer: ``{"message"}`` with the type in ``x-amzn-ErrorType``."""
    return status, {"x-amzn-ErrorType": f"{error_type}:{ERROR_NAMESPACE}"}, {"message": message}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: BedrockServer

    def do_GET(self) -> None:
        if self.path == "/stats":
            counts = dict(self.server.standin.counts) | dict(self.server.standin.model.counts)
            self._send((200, {}, counts), 0.0)
        else:
            self._send(error(404, "UnknownOperationException", "No such operation."), 0.0)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._send(*self.server.standin.answer("POST", self.path, headers, raw))

    def _send(self, answer: Answer, delay: float) -> None:
        status, headers, body = answer
        if delay > 0:
            time.sleep(delay)
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the caller gave up (a deadline test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class BedrockServer(ThreadingHTTPServer):
    """The HTTP server around a ``BedrockStandIn``; ``url`` is its base URL once bound (the
    value of a store's ``*_base_url`` for ``bedrock``)."""

    daemon_threads = True

    def __init__(self, standin: BedrockStandIn, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.standin = standin
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> threading.Thread:
        """Serve from a daemon thread (for tests); ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        return thread


@contextmanager
def serving(credentials: AwsCredentials, region: str = "us-east-1") -> Iterator[BedrockServer]:
    """A stand-in expecting ``credentials`` for ``region``, served from a daemon thread on a
    free port while the block runs (its state is ``server.standin``, its address
    ``server.url``)."""
    server = BedrockServer(BedrockStandIn(credentials, region=region))
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def credentials_from_environment() -> AwsCredentials:
    """The credentials in ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
    ``AWS_SESSION_TOKEN``; ``SystemExit`` naming what is missing."""
    access, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        raise SystemExit(
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any values: the stand-in checks "
            "that requests are signed with them; give the local stack the same)"
        )
    return AwsCredentials(access, secret, os.environ.get("AWS_SESSION_TOKEN") or None)


def main(argv: list[str] | None = None) -> int:
    """Serve on ``--port`` (default 8766) until interrupted; exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m tools.bedrock_standin")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    standin = BedrockStandIn(credentials_from_environment(), region=args.region)
    server = BedrockServer(standin, args.port)
    print(
        f"Bedrock stand-in at {server.url} (region {args.region}; Converse, InvokeModel for "
        "Titan and Cohere embeddings, Rerank; SigV4 checked; GET /stats)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
