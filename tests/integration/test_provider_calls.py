"""Provider calls as a whole: one deadline for everything a call does, and a cap on the size of
an answer, against raw loopback servers (``tests.support.model_servers.RawHTTPServer``) that
trickle, flood, lie in ``Content-Length``, read slowly or answer a name slowly.

Bounds are asserted as "finished within the deadline + ``MARGIN``", a generous margin for a
loaded 2-core machine (the implementation's own overshoot is milliseconds). Each misbehaving
server would keep a call busy for 10 s or more without the deadline, so the tests fail without
it. Names that do not exist (``*.test``) are answered by a fake ``socket.getaddrinfo``.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from agent_memory.errors import (
    AgentMemoryError,
    EndpointRefused,
    ProviderRejected,
    ProviderUnavailable,
)
from agent_memory.providers import network as provider_network
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.embeddings import (
    CustomEmbedder,
    OpenAIEmbedder,
    max_answer_bytes as embeddings_cap,
)
from agent_memory.providers.language_models import OpenAIChatModel, max_answer_bytes as chat_cap
from agent_memory.providers.network import CallPolicy
from tests.support.common import unique
from tests.support.handlers import build, invoke
from tests.support.model_servers import (
    RawAnswer,
    RawHTTPServer,
    flood,
    in_turn,
    response_bytes,
    send,
    then_wait,
    trickle,
)

KEY = "sk-test-bounds-0123456789abcdef"
MARGIN = 1.5
DIMS = 8
BODY = json.dumps({"data": [{"index": 0, "embedding": [0.5] * DIMS}]}).encode()
HEAD = response_bytes(200, b"", content_length=None)  # status line and headers, no length


@pytest.fixture
def server():
    with RawHTTPServer() as raw:
        yield raw


def patient(deadline: float, **kw: Any) -> ProviderClient:
    """A client whose per-read timeouts are longer than any test: only the deadline can end a
    call early."""
    policy = {"connect_timeout": 30.0, **{k: v for k, v in kw.items() if k in POLICY_FIELDS}}
    rest = {k: v for k, v in kw.items() if k not in POLICY_FIELDS}
    return ProviderClient(CallPolicy(deadline=deadline, read_timeout=30.0, **policy), **rest)


POLICY_FIELDS = {f.name for f in dataclasses.fields(CallPolicy)}


def timed(call: Callable[[], object]) -> tuple[AgentMemoryError | None, float]:
    started = time.monotonic()
    try:
        call()
    except AgentMemoryError as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def late(deadline: float) -> str:
    return (
        f"The provider at 127.0.0.1 did not answer within the call's deadline of {deadline:g} s; "
        "try again later."
    )


def wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < end, "the server did not finish its answer"
        time.sleep(0.02)


# --------------------------------------------------------------------------------------------
# One deadline for the whole call
# --------------------------------------------------------------------------------------------


def test_a_body_trickled_a_byte_at_a_time_is_cut_at_the_deadline(server):
    server.push(in_turn(send(HEAD), trickle(BODY + b" " * 100, every=0.2)))  # 25 s in all
    error, elapsed = timed(lambda: patient(1.5).post_json(server.url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert 1.4 <= elapsed < 1.5 + MARGIN
    assert len(server.requests) == 1  # no retry once the deadline has passed


def test_a_status_line_trickled_a_byte_at_a_time_is_cut_at_the_deadline(server):
    server.push(trickle(response_bytes(200, BODY), every=0.2))
    error, elapsed = timed(lambda: patient(1.5).post_json(server.url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert elapsed < 1.5 + MARGIN


def test_a_request_the_server_reads_slowly_is_cut_at_the_deadline():
    # 16 MB read at about 1.3 MB/s: some 12 s, and every send makes a little progress.
    with RawHTTPServer(body_pace=(65536, 0.05)) as slow_reader:
        payload = {"input": "x" * 16_000_000}
        call = patient(1.5)
        error, elapsed = timed(lambda: call.post_json(slow_reader.url, payload, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert elapsed < 1.5 + MARGIN


def test_a_content_length_that_promises_more_than_it_sends_ends_at_the_deadline(server):
    head = response_bytes(200, b"", content_length=len(BODY) + 50)
    server.push(then_wait(head + BODY, 20.0))
    error, elapsed = timed(lambda: patient(1.5).post_json(server.url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert elapsed < 1.5 + MARGIN


def test_retries_and_their_waits_stop_before_the_deadline(server):
    server.default = send(response_bytes(503, b"{}", headers={"Retry-After": "1"}))
    client = patient(1.8, max_retries=5, max_retry_after=5.0, rand=lambda: 0.0)
    error, elapsed = timed(lambda: client.post_json(server.url, {}, max_bytes=10_000))
    # Attempt at 0 s, wait 1 s, attempt at 1 s; another 1 s wait would leave less than
    # min_attempt (0.5 s) of the 1.8 s: not started.
    assert isinstance(error, ProviderUnavailable)
    assert str(error) == (
        "The provider at 127.0.0.1 failed (HTTP 503) and the call's deadline of 1.8 s leaves no "
        "time to try again; try again later."
    )
    assert error.retry_after_seconds == 1
    assert len(server.requests) == 2
    assert 1.0 <= elapsed < 1.8


def test_a_backoff_that_does_not_fit_is_not_slept(server):
    server.default = send(response_bytes(500, b"{}"))
    sleeps: list[float] = []
    client = patient(1.0, max_retries=3, sleep=sleeps.append, rand=lambda: 1.0)
    error, _ = timed(lambda: client.post_json(server.url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and "leaves no time to try again" in str(error)
    assert sleeps == []  # 0.5 s of backoff + 0.5 s of min_attempt > what was left of 1 s
    assert len(server.requests) == 1


def test_two_slow_calls_at_once_each_end_at_their_own_deadline(server):
    server.default = in_turn(send(HEAD), trickle(BODY + b" " * 100, every=0.2))
    client = patient(1.5)
    times: list[float] = []

    def one() -> None:
        error, elapsed = timed(lambda: client.post_json(server.url, {}, max_bytes=10_000))
        assert isinstance(error, ProviderUnavailable)
        times.append(elapsed)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(times) == 2 and all(t < 1.5 + MARGIN for t in times)  # not one after the other


@pytest.fixture
def names(monkeypatch):
    """A fake resolver for ``*.test`` names: ``names[host]`` is a list of answers (a string
    of addresses, or a number of seconds to hang for), used in turn, the last one again."""
    table: dict[str, list[Any]] = {}
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if not isinstance(host, str) or not host.endswith(".test"):
            return real(host, port, *args, **kwargs)
        answers = table[host]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, (int, float)):
            time.sleep(answer)
            answer = "127.0.0.1"
        family = socket.AF_INET6 if ":" in answer else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (answer, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return table


def test_a_slow_name_lookup_is_cut_at_the_deadline(server, names):
    names["slow-dns.test"] = [4.0]
    embedder = OpenAIEmbedder(
        KEY,
        "m",
        DIMS,
        base_url=f"http://slow-dns.test:{server.port}/v1",
        client=patient(1.0, max_retries=0),
    )
    error, elapsed = timed(lambda: embedder.embed(["a"]))
    assert isinstance(error, ProviderUnavailable)
    assert str(error) == late(1.0).replace("127.0.0.1", "slow-dns.test")
    assert elapsed < 1.0 + MARGIN
    assert server.connections == 0


def test_the_endpoint_checks_name_lookup_counts_toward_the_deadline(names):
    names["slow-check.test"] = [4.0]
    embedder = CustomEmbedder(
        "https://slow-check.test/v1", "m", DIMS, allow_private=False, client=patient(1.0)
    )
    error, elapsed = timed(lambda: embedder.embed(["a"]))
    assert isinstance(error, ProviderUnavailable)
    assert str(error) == (
        "The custom endpoint host 'slow-check.test' did not resolve within 1.0 s; try again later."
    )
    assert elapsed < 1.0 + MARGIN


def test_a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_connect(server, names):
    names["rebind.test"] = ["93.184.216.34", "127.0.0.1"]  # the check, then the connection
    embedder = CustomEmbedder(
        f"https://rebind.test:{server.port}/v1",
        "m",
        DIMS,
        allow_private=False,
        client=patient(5.0),
    )
    with pytest.raises(EndpointRefused) as error:
        embedder.embed(["a"])
    assert str(error.value) == (
        "The custom endpoint host 'rebind.test' resolves to 127.0.0.1, which is loopback; "
        "custom endpoints must resolve only to public addresses."
    )
    assert server.connections == 0  # nothing was sent to the loopback address


# --------------------------------------------------------------------------------------------
# The size of an answer
# --------------------------------------------------------------------------------------------


def embedder(server: RawHTTPServer, client: ProviderClient | None = None) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        KEY, "text-embedding-3-small", DIMS, base_url=server.url, client=client or patient(20.0)
    )


def too_large(limit: int) -> str:
    return (
        f"The provider at 127.0.0.1 answered HTTP 200 with more than {limit:,} bytes, more than "
        "a legitimate answer to this request can hold; it was not read further."
    )


def test_an_endless_answer_is_cut_at_the_cap(server):
    server.push(flood(HEAD, 200_000_000))
    error, elapsed = timed(lambda: embedder(server).embed(["a"]))
    assert isinstance(error, ProviderRejected) and str(error) == too_large(embeddings_cap(1, DIMS))
    wait_for(lambda: len(server.sent) == 1)
    assert server.sent[0] < 50_000_000  # what socket buffers took, not 200 MB
    assert elapsed < 10


def test_a_content_length_over_the_cap_is_refused_before_reading(server):
    server.push(flood(response_bytes(200, b"", content_length=200_000_000), 200_000_000))
    error, _ = timed(lambda: embedder(server).embed(["a"]))
    assert isinstance(error, ProviderRejected) and str(error) == too_large(embeddings_cap(1, DIMS))
    wait_for(lambda: len(server.sent) == 1)
    assert server.sent[0] < 50_000_000


def test_the_cap_grows_with_the_batch_and_the_dimensions():
    assert embeddings_cap(1, 1536) == 64 * 1024 + 256 + 1536 * 48  # 136 KiB for a route
    assert embeddings_cap(50, 1536) == 64 * 1024 + 50 * (256 + 1536 * 48)
    assert chat_cap(4096) == 576 * 1024
    assert chat_cap(2048) == 64 * 1024 + 2048 * 128


def _openai_style_embeddings(count: int, dimensions: int) -> bytes:
    """An answer as long as a legitimate one gets: every value the longest float32 repr, each
    on its own line under OpenAI's indentation."""
    value = "-1.2345678901234567e-05"
    items = []
    for index in range(count):
        values = ",\n".join(" " * 8 + value for _ in range(dimensions))
        items.append(
            f'    {{\n      "object": "embedding",\n      "index": {index},\n'
            f'      "embedding": [\n{values}\n      ]\n    }}'
        )
    return (
        '{\n  "object": "list",\n  "data": [\n' + ",\n".join(items) + "\n  ],\n"
        '  "model": "text-embedding-3-small",\n'
        '  "usage": {\n    "prompt_tokens": 8,\n    "total_tokens": 8\n  }\n}\n'
    ).encode()


def test_the_longest_legitimate_embeddings_answer_fits_the_cap(server):
    body = _openai_style_embeddings(3, 1536)
    assert 3 * 1536 * 30 < len(body) < embeddings_cap(3, 1536)
    server.push(send(response_bytes(200, body)))
    client = OpenAIEmbedder(KEY, "m", 1536, base_url=server.url, client=patient(20.0))
    vectors = client.embed(["a", "b", "c"])
    assert vectors.shape == (3, 1536)
    [request] = server.requests
    assert request.headers["accept-encoding"] == "identity"


def test_a_compressed_answer_is_refused(server):
    packed = gzip.compress(BODY)
    server.push(send(response_bytes(200, packed, headers={"Content-Encoding": "gzip"})))
    error, _ = timed(lambda: embedder(server).embed(["a"]))
    assert isinstance(error, ProviderRejected)
    assert str(error) == (
        "The provider at 127.0.0.1 answered HTTP 200 with a compressed body, which was not "
        "asked for (Accept-Encoding: identity)."
    )


def _chat_answer(text: str) -> bytes:
    return json.dumps(
        {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
    ).encode()


def test_a_chat_answer_over_its_token_budget_is_refused(server):
    server.push(send(response_bytes(200, _chat_answer('{"summary": "' + "x" * 200_000 + '"}'))))
    model = OpenAIChatModel(KEY, "gpt-4o-mini", base_url=server.url, client=patient(20.0))
    error, _ = timed(lambda: model.complete_json("Summarize as JSON.", "hi", max_tokens=16))
    assert isinstance(error, ProviderRejected) and str(error) == too_large(chat_cap(16))
    assert len(server.requests) == 1  # not asked for again: a second answer would be as long


def test_a_chat_answer_of_max_tokens_long_tokens_fits(server):
    # 4,096 tokens of 100 spaces each: longer than any real answer of that many tokens.
    text = '{"summary": "' + " " * 409_600 + '"}'
    server.push(send(response_bytes(200, _chat_answer(text))))
    model = OpenAIChatModel(KEY, "gpt-4o-mini", base_url=server.url, client=patient(20.0))
    assert model.complete_json("Summarize as JSON.", "hi", max_tokens=4096).data == {
        "summary": " " * 409_600
    }


# --------------------------------------------------------------------------------------------
# Over TLS: the handshake, each encrypted send and read keep the deadline too
# --------------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path, monkeypatch):
    """A self-signed certificate for 127.0.0.1, a server-side SSL context for it, and the
    process's provider HTTP client replaced by one that trusts it."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_file, key_file)
    client_context = ssl.create_default_context(cafile=str(cert_file))
    client = httpx.Client(
        transport=provider_network.DeadlineTransport(client_context),
        follow_redirects=False,
        trust_env=False,
    )
    monkeypatch.setattr(provider_network, "_http", client)
    yield server_context
    client.close()


@contextmanager
def serving_tls(context: ssl.SSLContext, answer: RawAnswer) -> Iterator[RawHTTPServer]:
    with RawHTTPServer(answer, tls=context) as server:
        yield server


def test_an_https_call_works_and_sends_a_large_body_whole(tls):
    body = json.dumps({"data": [{"index": 0, "embedding": [0.25] * DIMS}]}).encode()
    with serving_tls(tls, send(response_bytes(200, body))) as server:
        url = server.url
        answer = patient(10.0).post_json(url, {"input": "x" * 2_000_000}, max_bytes=10_000)
        assert answer == {"data": [{"index": 0, "embedding": [0.25] * DIMS}]}
        [request] = server.requests
        assert len(request.body) > 2_000_000


def test_an_https_body_trickled_a_byte_at_a_time_is_cut_at_the_deadline(tls):
    with serving_tls(tls, in_turn(send(HEAD), trickle(BODY + b" " * 100, every=0.2))) as server:
        url = server.url
        error, elapsed = timed(lambda: patient(1.5).post_json(url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert elapsed < 1.5 + MARGIN


def test_a_tls_handshake_that_never_ends_is_cut_at_the_deadline():
    # A plain server that reads the ClientHello and never answers it.
    with RawHTTPServer() as server:
        url = server.url.replace("http://", "https://")
        error, elapsed = timed(lambda: patient(1.5).post_json(url, {}, max_bytes=10_000))
    assert isinstance(error, ProviderUnavailable) and str(error) == late(1.5)
    assert elapsed < 1.5 + MARGIN


# --------------------------------------------------------------------------------------------
# Saving a store applies the rule its calls apply
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown", "reason"),
    [
        ("https://[::127.0.0.1]/v1", "::7f00:1", "reserved"),
        ("https://[64:ff9b::7f00:1]/v1", "64:ff9b::7f00:1", "an IPv6 form of 127.0.0.1 (loopback)"),
        ("https://[2002:7f00:1::]/v1", "2002:7f00:1::", "an IPv6 form of 127.0.0.1 (loopback)"),
        ("https://224.0.0.1/v1", "224.0.0.1", "multicast"),
    ],
)
def test_a_store_with_an_endpoint_its_calls_would_refuse_is_not_saved(
    tenant, function_env, url, shown, reason
):
    name = unique("endpoint")
    status, _, _ = invoke("put_store", build("put_store", tenant, name, body={"dimensions": 4}))
    assert status == 201
    try:
        body = {"llm_provider": "custom", "llm_model": "m", "llm_base_url": url}
        for store in (name, unique("new")):  # an existing store, and one that does not exist
            status, answer, _ = invoke("put_store", build("put_store", tenant, store, body=body))
            assert (status, answer) == (
                422,
                {
                    "error": "validation_error",
                    "message": "The store's settings are not valid; see details.",
                    "details": [
                        {
                            "field": "body",
                            "problem": f"llm_base_url must be a public address, not {shown}, "
                            f"which is {reason} (a local stack started with "
                            "KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 allows it)",
                        }
                    ],
                },
            )
        status, kept, _ = invoke("get_store", build("get_store", tenant, name))
        assert status == 200
        assert (kept["llm_provider"], kept["llm_base_url"], kept["dimensions"]) == ("none", None, 4)
        status, _, _ = invoke("get_store", build("get_store", tenant, store))
        assert status == 404
    finally:
        invoke("delete_store", build("delete_store", tenant, name))


def test_a_route_answers_within_its_deadline_while_the_provider_trickles(
    tenant, function_env, monkeypatch
):
    """The issue's case: one byte every 2 s kept POST .../memories busy for 40 s. Now the
    route's client (6 s deadline) gives up in time and the route answers 503."""
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    with RawHTTPServer(in_turn(send(HEAD), trickle(BODY + b" " * 40, every=0.5))) as server:
        name = unique("trickle")
        settings = {
            "embed_provider": "custom",
            "embed_model": "m",
            "embed_base_url": server.url,
            "dimensions": DIMS,
        }
        status, _, _ = invoke("put_store", build("put_store", tenant, name, body=settings))
        assert status == 201
        try:
            memory = {"text": "Alice plays chess", "actor_id": "alice"}
            started = time.monotonic()
            status, answer, headers = invoke(
                "add_memory", build("add_memory", tenant, name, body=memory)
            )
            elapsed = time.monotonic() - started
            assert (status, answer["error"]) == (503, "provider_unavailable")
            assert "deadline of 6 s" in answer["message"]
            assert headers["Retry-After"] == "2"  # every 503 says when to come back
            assert elapsed < 6.0 + MARGIN
            status, listed, _ = invoke("list_memories", build("list_memories", tenant, name))
            assert status == 200 and listed["memories"] == []
        finally:
            invoke("delete_store", build("delete_store", tenant, name))
