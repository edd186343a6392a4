"""One parser for every boolean setting (``edge.settings.parse_flag``): the functions, the local
stack's banner and its start read ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS`` alike (issue 32: ``y``
allowed private endpoints while the banner said they were refused; an empty value made every
request 500)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import local.__main__ as launcher
from agent_memory.edge.settings import FunctionSettings

ON = ["1", "true", "TRUE", " yes ", "On"]
OFF = ["", "0", "false", "No", " off"]
REFUSED = ["y", "t", "2", "enable", "true!"]


def _functions_allow(value: str) -> bool:
    settings = FunctionSettings.from_environ(
        {"KIVIDB_CONTROL_URL": "redis://127.0.0.1:1/0", "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": value}
    )
    return settings.allow_private_endpoints


@pytest.mark.parametrize("value", ON + OFF)
def test_the_functions_and_the_banner_read_a_flag_alike(monkeypatch, value):
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", value)
    allowed = _functions_allow(value)
    assert allowed is (value in ON)
    said = launcher.endpoints_line()
    assert said.startswith(
        "custom model endpoints and webhook URLs may be"
        if allowed
        else "custom model endpoints and webhook URLs must be public"
    )
    launcher._check_flags()  # the stack starts


@pytest.mark.parametrize("value", REFUSED)
def test_a_spelling_neither_reads_is_refused_by_both_naming_the_setting(monkeypatch, capsys, value):
    with pytest.raises(ValidationError, match="KIVIDB_ALLOW_PRIVATE_ENDPOINTS must be one of"):
        _functions_allow(value)
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", value)
    with pytest.raises(SystemExit) as exited:
        launcher._check_flags()
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(
        "local stack: KIVIDB_ALLOW_PRIVATE_ENDPOINTS must be one of 1, true, yes, on (on)"
    )
