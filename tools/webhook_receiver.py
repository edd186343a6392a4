"""A webhook receiver on loopback, standing in for a customer's endpoint in the tests and in
``bench.webhooks``: records every request (headers and body) and
answers as scripted: ``"ok"`` (204), ``"fail"`` (500), ``"slow:<s>"`` (waits, then 204),
``"hang:<s>"`` (waits past the sender's timeout, then 204), one behaviour per request in order,
then ``"ok"``."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Received:
    """One request as it came: its headers, its body (bytes) and the status it was answered."""

    headers: dict[str, str]
    body: bytes
    status: int


class WebhookReceiver(ThreadingHTTPServer):
    """The receiver on a free loopback port, serving on a daemon thread inside ``with``;
    ``script`` as the module says."""

    daemon_threads = True

    def __init__(self, script: list[str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script or [])
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Its URL, with a query string (a token, as a receiver may take one)."""
        return f"http://127.0.0.1:{self.server_address[1]}/hooks?token=abc"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()

    def next_behaviour(self, headers: dict[str, str]) -> str:
        """How to answer a request with ``headers``: the script's next behaviour."""
        with self.lock:
            return self.script.pop(0) if self.script else "ok"

    def delivered(self) -> list[Received]:
        """The requests answered 2xx."""
        with self.lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def wait_for(self, count: int, seconds: float = 15.0) -> list[Received]:
        """Wait until ``count`` requests were answered 2xx; those."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            done = self.delivered()
            if len(done) >= count:
                return done
            time.sleep(0.05)
        raise AssertionError(f"{len(self.delivered())} of {count} deliveries in {seconds} s")


class _Handler(BaseHTTPRequestHandler):
    server: WebhookReceiver
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        behaviour = self.server.next_behaviour(dict(self.headers.items()))
        kind, _, seconds = behaviour.partition(":")
        if kind in ("slow", "hang"):
            time.sleep(float(seconds))
        status = 500 if kind == "fail" else 204
        with self.server.lock:
            self.server.received.append(Received(dict(self.headers.items()), body, status))
        try:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()
        except OSError:  # the sender gave up waiting
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass
