"""check_endpoint: custom provider endpoints must be https:// and resolve to public addresses only.

Name resolution is replaced by a fake ``socket.getaddrinfo`` so each case controls the answers.
"""

import ipaddress
import socket
from typing import Any

import pytest

from agent_memory.errors import EndpointRefused, ProviderUnavailable, ValidationFailed
from agent_memory.providers import check_endpoint

URL = "https://models.example.test/v1"


@pytest.fixture
def resolve(monkeypatch):
    """Set the addresses the fake resolver answers with; records the (host, port) asked."""
    answers: list[str] = []
    asked: list[tuple[str, int]] = []

    def fake_getaddrinfo(host, port, *args, **kwargs):
        asked.append((host, port))
        result: list[tuple[Any, ...]] = []
        for address in answers:
            if ":" in address:
                result.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                result.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return result

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)

    def set_answers(*addresses: str) -> list[tuple[str, int]]:
        answers[:] = addresses
        return asked

    return set_answers


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::248", "::ffff:8.8.8.8"])
def test_public_answers_pass(resolve, address):
    asked = resolve(address)
    check_endpoint(URL, allow_private=False)
    assert asked == [("models.example.test", 443)]


def test_the_port_of_the_url_is_resolved(resolve):
    asked = resolve("93.184.216.34")
    check_endpoint("https://models.example.test:8443/v1", allow_private=False)
    assert asked == [("models.example.test", 8443)]


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("172.31.255.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - an answer to refuse, not a bind
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", ""),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "private"),
        ("fc00::5", "private"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "10.0.0.1 (private)"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:0.0.0.0", "unspecified"),
        ("::ffff:169.254.169.254", "metadata"),
        ("2002:a00:1::", "10.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
    ],
)
def test_non_public_answers_are_refused(resolve, address, reason):
    resolve(address)
    with pytest.raises(EndpointRefused) as error:
        check_endpoint(URL, allow_private=False)
    message = str(error.value)
    assert "models.example.test" in message
    assert str(ipaddress.ip_address(address.split("%")[0])) in message
    assert reason in message
    assert error.value.code == "endpoint_refused"
    assert isinstance(error.value, ValidationFailed)  # so the API answers 422


@pytest.mark.parametrize(
    "answers",
    [("93.184.216.34", "10.0.0.1"), ("10.0.0.1", "93.184.216.34"), ("2606:4700::1", "::1")],
)
def test_one_private_answer_among_public_ones_is_refused(resolve, answers):
    resolve(*answers)
    with pytest.raises(EndpointRefused, match="only to public addresses"):
        check_endpoint(URL, allow_private=False)


def test_ip_literal_hosts_are_checked_too(resolve):
    resolve("169.254.169.254")  # what getaddrinfo answers for a literal: the literal itself
    with pytest.raises(EndpointRefused, match="metadata"):
        check_endpoint("https://169.254.169.254/latest", allow_private=False)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://models.example.test/v1", "host 'models.example.test' must use https://"),
        ("ftp://models.example.test/", "must be an https:// URL"),
        ("models.example.test", "must be an https:// URL"),
        ("https:///v1", "must be an https:// URL with a host name"),
    ],
)
def test_only_https_unless_private_allowed(resolve, url, problem):
    resolve("93.184.216.34")
    with pytest.raises(EndpointRefused, match=problem):
        check_endpoint(url, allow_private=False)


def test_allow_private_lets_loopback_and_http_through(resolve):
    asked = resolve("127.0.0.1")
    check_endpoint("http://127.0.0.1:8080/v1", allow_private=True)
    check_endpoint("https://models.example.test/v1", allow_private=True)
    check_endpoint("http://localhost:11434/v1", allow_private=True)
    assert asked == []  # nothing to refuse, so nothing resolved
    with pytest.raises(EndpointRefused, match="must be an http:// or https:// URL"):
        check_endpoint("ftp://127.0.0.1/", allow_private=True)


def test_credentials_in_the_url_are_refused_without_echoing_them(resolve):
    resolve("93.184.216.34")
    with pytest.raises(EndpointRefused) as error:
        check_endpoint("https://user:sk-secret-123@models.example.test/v1", allow_private=False)
    assert "sk-secret-123" not in str(error.value)
    assert "models.example.test" in str(error.value)


def test_the_message_names_the_host_not_the_url(resolve):
    resolve("10.0.0.1")
    with pytest.raises(EndpointRefused) as error:
        check_endpoint("https://models.example.test/v1?key=sk-in-query", allow_private=False)
    assert "sk-in-query" not in str(error.value)


@pytest.mark.parametrize("url", ["https:///v1", "https://[::1/v1", "https://h.test:99999/"])
def test_malformed_urls_are_refused(resolve, url):
    resolve("93.184.216.34")
    with pytest.raises(EndpointRefused):
        check_endpoint(url, allow_private=False)


def test_resolution_failure_is_provider_unavailable(monkeypatch):
    def failing(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", failing)
    with pytest.raises(ProviderUnavailable) as error:
        check_endpoint(URL, allow_private=False)
    assert "models.example.test" in str(error.value)
    assert "cannot be resolved" in str(error.value)
    assert error.value.code == "provider_unavailable"


def test_no_answer_is_provider_unavailable(resolve):
    resolve()
    with pytest.raises(ProviderUnavailable, match="no address"):
        check_endpoint(URL, allow_private=False)
