"""Database URLs as the admin tool, the local stack and its scheduler print them: every
credential form redis-py reads (``redis.connection.parse_url``) is masked."""

from __future__ import annotations

import pytest
from redis.connection import URL_QUERY_ARGUMENT_PARSERS, parse_url

from agent_memory.database.urls import SHOWN_OPTIONS, mask_url, url_secrets

CASES = [
    # (url, printed, the secrets in it)
    ("redis://h:6379/0", "redis://h:6379/0", []),
    ("redis://user:hunter2@h:6379/0", "redis://user:***@h:6379/0", ["hunter2"]),
    ("rediss://:hunter2@h:6380/1", "rediss://:***@h:6380/1", ["hunter2"]),
    ("redis://hunter2@h/0", "redis://***@h/0", ["hunter2"]),  # a password without its ':'
    ("redis://h:6379/0?password=hunter2", "redis://h:6379/0?***", ["hunter2"]),
    ("redis://h/0?db=2&password=hunter2&cluster=1", "redis://h/0?db=2&***&cluster=1", ["hunter2"]),
    ("redis://h/0?pass%77ord=hunter2", "redis://h/0?***", ["hunter2"]),  # the name decoded
    ("redis://h/0?password=hun%74er2", "redis://h/0?***", ["hun%74er2", "hunter2"]),
    ("redis://h/0?username=app&password=hunter2", "redis://h/0?username=app&***", ["hunter2"]),
    (
        "rediss://h/0?ssl_password=hunter2&ssl_keyfile=/k.pem",
        "rediss://h/0?***&ssl_keyfile=/k.pem",
        ["hunter2"],
    ),
    (
        "unix:///run/redis.sock?db=3&password=hunter2",
        "unix:///run/redis.sock?db=3&***",
        ["hunter2"],
    ),
    ("unix://app:hunter2@/run/redis.sock?db=3", "unix://app:***@/run/redis.sock?db=3", ["hunter2"]),
    # unencoded '#' and '?' in a password: the rest of it is a fragment, or a query part
    ("redis://:hun#ter2@h/0", "redis://:***#***", ["hun", "ter2@h/0"]),
    ("redis://:hun?ter2@h/0", "redis://:***?***", ["hun", "ter2@h/0"]),
    ("redis://u:p%40ss@h/0", "redis://u:***@h/0", ["p%40ss", "p@ss"]),
]


@pytest.mark.parametrize(("url", "printed", "secrets"), CASES)
def test_every_credential_redis_py_reads_is_masked(url, printed, secrets):
    assert mask_url(url) == printed
    for secret in secrets:
        assert secret in url_secrets(url)
        assert secret not in printed


@pytest.mark.parametrize(("url", "printed", "secrets"), CASES)
def test_what_redis_py_would_send_as_a_password_is_never_printed(url, printed, secrets):
    try:
        options = parse_url(url)
    except ValueError:  # an unencoded '#' or '?' leaves a port redis-py cannot read
        options = {}
    for name in ("password", "ssl_password"):
        if options.get(name):
            assert options[name] not in mask_url(url)
            assert options[name] in url_secrets(url)


def test_a_text_that_is_no_url_is_printed_as_it_is():
    assert mask_url("not a url") == "not a url"
    assert url_secrets("redis://h/0?db=1") == []


def test_the_options_shown_include_every_option_redis_py_parses():
    """A secret option redis-py learns to read would be masked anyway (only known ones are
    shown); this keeps the list of known ones true."""
    assert set(URL_QUERY_ARGUMENT_PARSERS) <= SHOWN_OPTIONS
    assert not {"password", "ssl_password"} & SHOWN_OPTIONS
