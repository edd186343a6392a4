"""What ``tools.admin`` prints never holds an instance's password, whichever form redis-py
reads it in: the URL's user part, or its ``password=`` / ``ssl_password=`` query options, for
``redis://``, ``rediss://`` and ``unix://`` URLs. The databases named here cannot be reached
(nothing listens on ports 2 and 3, no such socket), so they are registered without touching
any database."""

from __future__ import annotations

import pytest

from tests.support.common import unique
from tools import admin

SECRET = "hunter2-Zq9"
URLS = [
    f"redis://user:{SECRET}@127.0.0.1:2/5",
    f"redis://127.0.0.1:2/6?password={SECRET}",
    f"redis://127.0.0.1:2/7?db=7&pass%77ord={SECRET}",
    f"rediss://127.0.0.1:3/5?username=app&password={SECRET}",
    f"rediss://127.0.0.1:3/6?ssl_password={SECRET}",
    f"unix:///nonexistent/kividb-{SECRET[:3]}.sock?db=2&password={SECRET}",
    f"unix://app:{SECRET}@/nonexistent/kividb.sock?db=3",
]


@pytest.mark.parametrize("url", URLS)
def test_no_output_of_the_admin_tool_shows_the_password(url, redis_url, capsys):
    org, instance = unique("org"), unique("db")
    argv = ["--control-url", redis_url, "--release-hold", "0"]
    outputs = []
    for command in (
        ["create-org", org],
        ["register-instance", org, instance, url, "--allow-unreachable"],
        ["register-instance", org, instance, url, "--allow-unreachable"],  # again: unchanged
        ["list-instances", org],
        ["remove-instance", org, instance],
        ["register-instance", org, instance, url, "--allow-unreachable"],
        ["delete-org", org],
    ):
        assert admin.main([*argv, *command]) == 0
        outputs.append(capsys.readouterr())
    listed = outputs[3].out
    assert listed.startswith(f"{instance}\t") and "***" in listed
    assert "127.0.0.1" in listed or "/nonexistent/" in listed
    for printed in outputs:
        assert SECRET not in printed.out and SECRET not in printed.err


FORGED = "phone\nkey_000000000000\tcreated 2026-01-01T00:00:00+00:00\tadmin\x1b[2K\u202e"


def test_list_keys_escapes_control_characters_so_a_name_cannot_forge_a_line(redis_url, capsys):
    """Issue 32: a key name with a newline and an escape sequence printed raw forged an admin
    key's line in the operator's terminal. Each key is one line, its name escaped."""
    org = unique("org")
    argv = ["--control-url", redis_url, "--release-hold", "0"]
    assert admin.main([*argv, "create-org", org]) == 0
    assert admin.main([*argv, "issue-key", org, "--access", "read", "--name", FORGED]) == 0
    capsys.readouterr()
    assert admin.main([*argv, "list-keys", org]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "\x1b" not in lines[0] and "\u202e" not in lines[0]
    assert lines[0].count("\t") == 3  # id, created, scope, name: no tab of the name's own
    assert lines[0].endswith(
        "\tphone\\nkey_000000000000\\tcreated 2026-01-01T00:00:00+00:00\\tadmin\\x1b[2K\\u202e"
    )
    assert admin.main([*argv, "delete-org", org]) == 0
