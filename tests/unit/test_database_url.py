"""A database URL of which no client can be made is refused before any connection, in one line
that names the option or the reason and never the URL's credentials (``db.check_url``), through
``tools.admin`` as through every client made by ``redis_client``."""

from __future__ import annotations

import pytest

from agent_memory.database.client import check_url
from agent_memory.errors import ValidationFailed
from tools import admin

SECRET = "s3cret-pw"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (f"redis://:{SECRET}@127.0.0.1:1/0?CLUSTER=1", "'CLUSTER' is spelled 'cluster'"),
        (f"redis://:{SECRET}@127.0.0.1:1/0?cluster=1&cluster=0", "more than once"),
        (f"redis://:{SECRET}@127.0.0.1:1/0?cluster=1&foo=bar", "takes: 'foo'"),
        (f"unix:///tmp/none.sock?password={SECRET}&foo=1", "no unix:// connection takes: 'foo'"),
        (f"redis://u:{SECRET}@[::1:6379/0", "Invalid IPv6 URL"),
        (f"redis://:{SECRET}@127.0.0.1:99999/0", "Port out of range"),
        (f"redis://:{SECRET}@127.0.0.1:1/0?socket_timeout=abc", "'socket_timeout'"),
        (f"http://:{SECRET}@127.0.0.1:1/0", "schemes"),
    ],
)
def test_a_url_no_client_can_be_made_of_is_one_line_without_its_password(url, problem, capsys):
    with pytest.raises(ValidationFailed, match=problem):
        check_url(url)
    assert admin.main(["--control-url", url, "list-keys", "org"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and SECRET not in err
    assert err.startswith("validation_error: ")


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?socket_timeout=2&health_check_interval=5",
        "rediss://u:p@example.com:6380/0?ssl_cert_reqs=none&cluster=1",
        "unix:///tmp/redis.sock?db=2",
        "redis://127.0.0.1:6379/0?cluster=no",
    ],
)
def test_urls_with_options_redis_py_takes_pass(url):
    check_url(url)
