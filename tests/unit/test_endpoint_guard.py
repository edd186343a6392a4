"""check_endpoint: custom provider endpoints must be https:// and resolve to public addresses only,
and saving a store applies the same rule to an IP literal in its base URL.

Name resolution is replaced by a fake ``socket.getaddrinfo`` so each case controls the answers,
except for IP literals, which the real resolver answers without any network.
"""

import ipaddress
import socket
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from agent_memory.errors import EndpointRefused, ProviderUnavailable, ValidationFailed
from agent_memory.providers.addresses import not_public
from agent_memory.providers.network import check_endpoint
from agent_memory.stores.models import ProviderSettings

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


# --------------------------------------------------------------------------------------------
# One rule when a store is saved and when its endpoint is called
# --------------------------------------------------------------------------------------------


def _url(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"https://{host}/v1"


def _saved(url: str) -> bool:
    """Whether a store with this custom base URL can be saved (outside the local stack)."""
    try:
        ProviderSettings(llm_provider="custom", llm_model="m", llm_base_url=url)
    except ValidationError:
        return False
    return True


def _called(url: str) -> bool:
    """Whether a call to this endpoint gets past the guard, resolving with the real
    ``getaddrinfo`` (an IP literal resolves to itself, without any network)."""
    try:
        check_endpoint(url, allow_private=False)
    except EndpointRefused:
        return False
    return True


@pytest.mark.parametrize(
    ("url", "shown", "reason"),
    [
        ("https://[::127.0.0.1]/v1", "::7f00:1", "reserved"),
        ("https://[64:ff9b::7f00:1]/v1", "64:ff9b::7f00:1", "an IPv6 form of 127.0.0.1 (loopback)"),
        ("https://[2002:7f00:1::]/v1", "2002:7f00:1::", "an IPv6 form of 127.0.0.1 (loopback)"),
        ("https://224.0.0.1/v1", "224.0.0.1", "multicast"),
    ],
)
def test_addresses_the_call_refuses_are_refused_when_the_store_is_saved(url, shown, reason):
    with pytest.raises(ValidationError) as error:
        ProviderSettings(llm_provider="custom", llm_model="m", llm_base_url=url)
    [problem] = error.value.errors()
    assert problem["msg"] == (
        f"Value error, llm_base_url must be a public address, not {shown}, which is {reason} "
        "(a local stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 allows it)"
    )
    assert not _called(url)


# Every special-purpose block of the IANA registries (RFC 6890 and its successors) and the IPv6
# forms that carry an IPv4 address, so that the examples do not all fall in public space.
_SPECIAL = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/8",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",
    "2001:db8::/32",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
]


def _embedding(v4: ipaddress.IPv4Address) -> st.SearchStrategy[ipaddress.IPv6Address]:
    value = int(v4)
    return st.sampled_from(
        [
            ipaddress.IPv6Address((0xFFFF << 32) | value),  # ::ffff:a.b.c.d
            ipaddress.IPv6Address((0x2002 << 112) | (value << 80)),  # 2002:aabb:ccdd::
            ipaddress.IPv6Address((0x64FF9B << 96) | value),  # 64:ff9b::a.b.c.d
            ipaddress.IPv6Address(value),  # ::a.b.c.d
        ]
    )


_IP_LITERALS = st.one_of(
    st.ip_addresses(),
    st.sampled_from(_SPECIAL).flatmap(lambda net: st.ip_addresses(network=net)),
    st.ip_addresses(v=4).flatmap(_embedding),
)


@settings(max_examples=600, deadline=None)
@given(address=_IP_LITERALS)
def test_for_any_ip_literal_saving_and_calling_give_the_same_verdict(address):
    url = _url(address)
    assert _saved(url) == _called(url) == (not_public(address) is None)
