"""Traces: a handler's invocation makes subsegments for its database round trips, provider calls
and index builds, annotated with organization, store and route and never with a key or a text.

The tracer is Powertools' ``Tracer`` on a real X-Ray recorder whose daemon is a UDP socket on
loopback (what the recorder sends, parsed as the daemon would), installed with
``observability.use_tracer``; outside Lambda no tracer is made (``tracing_on``)."""

import io
import json
import logging
import socket

import pytest
from aws_lambda_powertools import Tracer
from aws_xray_sdk.core.context import Context
from aws_xray_sdk.core.recorder import AWSXRayRecorder

from agent_memory import observability
from tests.support.common import unique
from tests.support.embeddings import DIMS, FakeProvider, serving
from tests.support.handlers import build, invoke


class Daemon:
    """A stand-in for the X-Ray daemon: a UDP socket on loopback keeping every document the
    SDK sends (a JSON header line, then a segment or a streamed subsegment)."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.address = f"127.0.0.1:{self.socket.getsockname()[1]}"

    def documents(self) -> list[dict]:
        found = []
        while True:
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                return found
            header, _, body = data.decode().partition("\n")
            assert json.loads(header) == {"format": "json", "version": 1}
            found.append(json.loads(body))


def _subsegments(document: dict) -> list[dict]:
    found = []
    for sub in document.get("subsegments", []):
        found.append(sub)
        found.extend(_subsegments(sub))
    return found


@pytest.fixture
def traced():
    daemon = Daemon()
    recorder = AWSXRayRecorder()
    recorder.configure(
        daemon_address=daemon.address,
        sampling=False,
        context=Context(),
        context_missing="RUNTIME_ERROR",
        streaming_threshold=10_000,
    )
    observability.use_tracer(Tracer(provider=recorder, auto_patch=False, disabled=False))

    def trace(handler_name, event):
        recorder.begin_segment("kividb-test")
        try:
            answer = invoke(handler_name, event)
        finally:
            recorder.end_segment()
        [document] = daemon.documents()
        return answer, _subsegments(document)

    yield trace
    observability.use_tracer(None)
    Tracer._reset_config()
    daemon.socket.close()


def test_a_handler_traces_its_database_round_trips_with_organization_store_and_route(
    tenant, function_env, traced
):
    store = unique("traced")
    (status, _, _), _ = traced("put_store", build("put_store", tenant, store))
    assert status == 201
    (status, body, _), subsegments = traced("add_events", build("add_events", tenant, store))
    assert status == 200 and body["message_count"] == 2
    names = [s["name"] for s in subsegments]
    assert names[0] == "## lambda_handler" and "redis" in names
    handler = subsegments[0]
    assert handler["annotations"]["ColdStart"] in (True, False)
    for sub in subsegments:
        assert sub["annotations"]["organization"] == tenant.org_id
        assert sub["annotations"]["store"] == store
        assert sub["annotations"]["route"].endswith("/sessions/{session_id}/events")
    # Never a key, a message's text or a response body in what is sent.
    sent = json.dumps(subsegments)
    assert tenant.api_key not in sent and "ORD-2291" not in sent
    traced("delete_store", build("delete_store", tenant, store))


def test_a_search_traces_its_index_build(tenant, function_env, traced):
    store = unique("traced")
    traced("put_store", build("put_store", tenant, store, body={"dimensions": 3}))
    memory = {"text": "Deploys on Fridays", "actor_id": "user-7", "vector": [1, 0, 0]}
    (status, _, _), _ = traced("add_memory", build("add_memory", tenant, store, body=memory))
    assert status == 201
    body = {"query": "fridays", "mode": "keyword", "actor_id": "user-8"}  # an actor not cached
    (status, _, _), subsegments = traced(
        "search_memories", build("search_memories", tenant, store, body=body)
    )
    assert status == 200
    assert "index_build" in [s["name"] for s in subsegments]
    traced("delete_store", build("delete_store", tenant, store))


def test_every_answer_names_its_request_and_so_do_its_log_lines(tenant, function_env):
    # What the functions' logger writes, formatted as Powertools formats it (JSON lines).
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(observability.logger.registered_formatter)
    observability.logger.addHandler(handler)
    # A database that cannot be reached answers 503, which is logged (a 4xx is not).
    tenant.control.register_instance(
        tenant.org_id, "down", "redis://127.0.0.1:1/0", allow_unreachable=True
    )
    try:
        for name, instance, request_id, status in (
            ("get_store", tenant.instance_id, "req-1", 404),
            ("list_instance_stores", "down", "req-2", 503),
        ):
            event = build(name, tenant, unique("store"))
            path = event["rawPath"].replace(
                f"/instances/{tenant.instance_id}/", f"/instances/{instance}/"
            )
            event["rawPath"] = event["requestContext"]["http"]["path"] = path
            event["requestContext"]["requestId"] = request_id
            written.seek(0)
            written.truncate()
            answer = invoke(name, event)
            assert (answer[0], answer[2][observability.REQUEST_ID_HEADER]) == (status, request_id)
            lines = [json.loads(line) for line in written.getvalue().splitlines() if line]
            assert all(line["correlation_id"] == request_id for line in lines), lines
            assert [line["message"] for line in lines] == (
                ["request failed"] if status == 503 else []
            )
    finally:
        observability.logger.removeHandler(handler)


def test_outside_lambda_no_tracer_is_made(monkeypatch):
    monkeypatch.delenv("LAMBDA_TASK_ROOT", raising=False)
    observability.use_tracer(None)
    assert not observability.tracing_on() and observability.tracer() is None
    with observability.subsegment("redis"):  # costs nothing, raises nothing
        pass


def test_a_provider_call_is_traced_without_its_key_or_text(
    tenant, function_env, traced, monkeypatch
):
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    with serving(FakeProvider()) as provider:
        store = unique("traced")
        settings = {
            "embed_provider": "custom",
            "embed_base_url": provider.url,
            "embed_model": "m",
            "dimensions": DIMS,
            "embed_api_key": "sk-secret-1234",
        }
        (status, _, _), _ = traced("put_store", build("put_store", tenant, store, body=settings))
        assert status == 201
        memory = {"text": "Deploys to eu-west-1 on Fridays", "actor_id": "user-7"}
        (status, _, _), subsegments = traced(
            "add_memory", build("add_memory", tenant, store, body=memory)
        )
        assert status == 201 and provider.requests
        [call] = [s for s in subsegments if s["name"] == "provider"]
        assert call["annotations"]["store"] == store
        sent = json.dumps(subsegments)
        assert "sk-secret-1234" not in sent and "eu-west-1" not in sent
        traced("delete_store", build("delete_store", tenant, store))
