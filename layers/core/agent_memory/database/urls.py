"""Database URLs as they may be printed or logged: every credential form redis-py reads masked.

redis-py's ``from_url`` (``redis.connection.parse_url``) takes credentials from the URL's user
part (``redis://user:password@host``, ``unix://user:password@/path``) and from its query string
(``?password=...``, ``?username=...``, and ``ssl_password=`` for an encrypted TLS key file;
query options override the user part). :func:`mask_url` replaces each secret, and whatever
else may hold a piece of one, with ``***``;
:func:`url_secrets` lists them, so that text that may quote one (an error message) can be
cleaned too. Pure standard library, for the admin tool, the local stack and its scheduler.
"""

from __future__ import annotations

from urllib.parse import unquote, unquote_plus, urlsplit

MASK = "***"
SHOWN_OPTIONS = frozenset(
    {
        # redis.connection.URL_QUERY_ARGUMENT_PARSERS (redis-py 8.1)
        "db",
        "socket_timeout",
        "socket_connect_timeout",
        "socket_read_size",
        "socket_keepalive",
        "retry_on_timeout",
        "retry_on_error",
        "max_connections",
        "health_check_interval",
        "ssl_check_hostname",
        "ssl_include_verify_flags",
        "ssl_exclude_verify_flags",
        "ssl_min_version",
        "timeout",
        "protocol",
        "legacy_responses",
        # other options a database URL may carry that are no secret
        "cluster",
        "username",
        "client_name",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_certfile",
        "ssl_keyfile",
    }
)
"""Query options whose values :func:`mask_url` shows. Every other part of the query is
masked whole: ``password=`` and ``ssl_password=`` (secrets redis-py reads), and anything it
does not know, which may be a piece of a password written without percent-encoding
(``redis://:pa?ss@host`` puts ``ss@host`` in the query)."""


def _split_userinfo(netloc: str) -> tuple[str | None, str]:
    """``(userinfo, host)``; userinfo is what comes before the last ``@`` (None without one),
    as ``urllib.parse`` reads it."""
    userinfo, at, host = netloc.rpartition("@")
    return (userinfo, host) if at else (None, netloc)


def _odd_port(host: str) -> str | None:
    """The text after the port's ``:`` in ``host`` when it is no port (not ASCII digits): what
    an unencoded ``#``, ``?`` or ``/`` in a password leaves there (``redis://:pa#ss@h`` has the
    host ``:pa``). None when ``host`` has a port or none."""
    after_ip6 = host.rpartition("]")[2] if host.startswith("[") else host
    _, colon, port = after_ip6.rpartition(":")
    if not colon or (port.isascii() and port.isdigit()) or port == "":
        return None
    return port


def _shown(part: str) -> bool:
    """Whether a query part ``name=value`` is an option in ``SHOWN_OPTIONS`` (its name read as
    parse_qs reads it, percent-decoded: ``d%62=`` is ``db=``)."""
    name, equals, _ = part.partition("=")
    return bool(equals) and unquote_plus(name) in SHOWN_OPTIONS


def mask_url(url: str) -> str:
    """``url`` with its credentials masked, for printing: the password of the user part
    (``redis://user:***@host``; a user part without ``:``, which may be a password written
    without it, as a whole: ``redis://***@host``), a port that is no number (the start of a
    password cut by an unencoded ``#``, ``?`` or ``/``), every part of the query but the options of
    ``SHOWN_OPTIONS`` (``?password=secret&db=2`` -> ``?***&db=2``), and a fragment (redis-py
    ignores one; a ``#`` in an unencoded password starts it). Everything else is kept as
    written. A text without ``://`` is returned as it is."""
    parts = urlsplit(url)
    if not parts.scheme or "://" not in url:
        return url
    userinfo, host = _split_userinfo(parts.netloc)
    odd = _odd_port(host)
    if odd is not None:
        host = host[: -len(odd)] + MASK
    netloc = host
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        netloc = (f"{user}:{MASK}" if colon else MASK) + "@" + host
    masked = f"{parts.scheme}://{netloc}{parts.path}"
    if parts.query or "?" in url.partition("#")[0]:
        masked += "?" + "&".join(p if _shown(p) else MASK for p in parts.query.split("&"))
    if parts.fragment or "#" in url:
        masked += "#" + MASK
    return masked


def url_secrets(url: str) -> list[str]:
    """Every piece :func:`mask_url` masks in ``url`` that could be a secret (the user part's
    password, or the user part without ``:``; a port that is no number; each masked query
    part and its value; the fragment), as written and percent-decoded (an error text may hold
    either), longest first, without empty ones."""
    parts = urlsplit(url)
    found: set[str] = set()
    userinfo, host = _split_userinfo(parts.netloc)
    if userinfo is not None:
        user, colon, password = userinfo.partition(":")
        found.update([password, unquote(password)] if colon else [user, unquote(user)])
    odd = _odd_port(host)
    if odd is not None:
        found.update([odd, unquote(odd)])
    for part in parts.query.split("&") if parts.query else []:
        if not _shown(part):
            value = part.partition("=")[2]
            found.update([part, value, unquote_plus(value)])
    found.add(parts.fragment)
    return sorted((s for s in found if s), key=len, reverse=True)
