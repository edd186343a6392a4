"""The rule a URL of a custom endpoint is saved with: a model provider's base URL
(``stores.models.ProviderSettings``) or a webhook's URL (``webhooks.models.WebhookEndpoint``).
The same address rule is applied again on every call, to the addresses connected to
(``providers.network``)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from agent_memory.providers.addresses import not_public

_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_endpoint_url(
    field: str, url: str, *, allow_private: bool = False, allow_query: bool = False
) -> None:
    """A custom endpoint's base URL (or, with ``allow_query``, a webhook's URL, whose query is
    sent as given): ``https://`` (with ``allow_private``, the local stack's
    KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1, also ``http://``) with a host, a valid port and a path,
    nothing else: no credentials, no whitespace or control characters, no query and no fragment
    (the call appends ``/embeddings`` or ``/chat/completions`` to it, which a query or fragment
    would swallow: ``https://example.com#@127.0.0.1/v1``), and a host the HTTP client can build
    a request for (``providers.network.request_problem``: a punycode label that does not decode,
    say).

    Without ``allow_private``, also a valid public host: IP literals must pass
    ``providers.addresses.not_public``, the same rule the call applies to every address a name
    resolves to (``providers.network.check_endpoint``), so a literal saved here is never refused at
    the first call. Names that later resolve to private addresses are caught when the endpoint is
    called.
    """
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise ValueError(f"{field} must not contain spaces or control characters")
    if "#" in url or ("?" in url and not allow_query):
        raise ValueError(
            f"{field} must not have a query or a fragment ('?' or '#'); give the base URL only"
        )
    parts = urlsplit(url)
    schemes = ("http", "https") if allow_private else ("https",)
    if allow_private and (parts.scheme not in schemes or not parts.hostname):
        raise ValueError(f"{field} must be an http(s):// URL with a host name")
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(
            f"{field} must be an https:// URL with a host name (a local stack started with "
            "KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 also takes http:// and private addresses)"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{field} must not hold credentials; "
            + (
                "a receiver can take a token in the query string instead"
                if allow_query
                else "send the key as the api_key field"
            )
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{field} has an invalid port") from exc
    if port == 0:
        raise ValueError(f"{field} has an invalid port")
    # Imported here: the models need the HTTP client only to check a custom base URL.
    from agent_memory.providers.network import request_problem

    unsendable = request_problem(url)
    if unsendable is not None:
        raise ValueError(
            f"{field} has a host name the HTTP client cannot send a request to ({unsendable})"
        )
    if not allow_private:
        _check_public_host(field, parts.hostname.rstrip("."))


def _check_public_host(field: str, host: str) -> None:
    """The host of a custom endpoint saved without ``allow_private``: a valid public name, or
    an IP literal that ``providers.addresses.not_public`` passes (``ValueError`` says why not)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        labels = host.split(".")
        if len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
            raise ValueError(f"{field} has an invalid host name") from None
        # A top-level label is never numeric (RFC 3696 section 2); refusing one also refuses
        # the shorthand IPv4 forms resolvers accept: 127.1, 2130706433, 0x7f000001.
        if labels[-1].isdigit() or re.fullmatch(r"0x[0-9a-fA-F]+", labels[-1]):
            raise ValueError(f"{field} must name a host or give a full IP address") from None
        if labels[-1].lower() == "localhost":
            raise ValueError(
                f"{field} must be a public address, not localhost (a local stack started with "
                "KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 allows it)"
            ) from None
        return
    reason = not_public(address)
    if reason:
        raise ValueError(
            f"{field} must be a public address, not {address}, which is {reason} (a local "
            "stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 allows it)"
        )
