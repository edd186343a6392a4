"""Which IP addresses a custom provider endpoint may reach: one rule for saving a store
(``providers.endpoint_urls.check_endpoint_url``, IP literals in the URL) and for calling it
(``providers.network.check_endpoint`` and the connection itself, every address a name resolves
to).

Pure standard library (``ipaddress``), so the pydantic models can use it without importing the
HTTP client.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6052 well-known NAT64 prefix: the last 32 bits are an IPv4 address a NAT64 gateway reaches.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598 carrier-grade NAT
_METADATA = ipaddress.ip_address("169.254.169.254")


def not_public(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` when it is one.

    The reason is a short phrase: "loopback", "private", "link-local", "multicast",
    "reserved", "the cloud metadata service (link-local)", "an IPv6 form of 127.0.0.1
    (loopback)"... Refused: loopback (127.0.0.0/8, ::1), unspecified, link-local (169.254/16
    with the metadata service 169.254.169.254, fe80::/10), multicast (224.0.0.0/4, ff00::/8),
    IPv6 site-local (fec0::/10), carrier-grade NAT (100.64/10, RFC 6598), private and the other
    ranges of the IANA special-purpose registries (``ipaddress`` ``is_private``,
    ``is_reserved``, ``is_global``; RFC 6890), which include IPv4-compatible ``::a.b.c.d``
    (``::/8``) and Teredo (2001::/32). IPv6 forms that carry an IPv4 address are judged by that
    address: IPv4-mapped ``::ffff:a.b.c.d`` (RFC 4291), 6to4 ``2002:aabb:ccdd::/48`` (RFC 3056)
    and NAT64 ``64:ff9b::a.b.c.d`` (RFC 6052); a public one embedded in a mapped or NAT64
    address is accepted, since that is the IPv4 address the connection reaches.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped if address.ipv4_mapped is not None else address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = not_public(embedded)
            if inner:
                return f"an IPv6 form of {embedded} ({inner})"
            if address.ipv4_mapped is not None or address in _NAT64:
                return None  # ::ffff:a.b.c.d is that IPv4 address; 64:ff9b::/96 is DNS64
    if address == _METADATA:
        return "the cloud metadata service (link-local)"
    for test, name in (
        (address.is_loopback, "loopback"),
        (address.is_unspecified, "unspecified"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (isinstance(address, ipaddress.IPv6Address) and address.is_site_local, "site-local"),
        (address in _SHARED, "carrier-grade NAT (shared address space)"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "not a global address"),
    ):
        if test:
            return name
    return None
