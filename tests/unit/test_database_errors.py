"""How redis-py's error replies become domain errors (``agent_memory.db.database_errors``),
without a server: the reply is built as redis-py's parser builds it."""

from __future__ import annotations

import re

import pytest
import redis
from redis._parsers.base import BaseParser

from agent_memory.database.client import database_errors, error_code
from agent_memory.database.connections import HANDSHAKE_REFUSED, HandshakeFailed
from agent_memory.errors import DatabaseRefused, DatabaseUnavailable, WritesRefused

MISCONF = (
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist "
    "to disk."
)


def in_pipeline(exc: redis.ResponseError, number: int, command: str) -> redis.ResponseError:
    """``exc`` as redis-py annotates the error of a command in a pipeline."""
    exc.args = (f"Command # {number} ({command}) of pipeline caused error: {exc.args[0]}",)
    return exc


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (BaseParser.parse_error(MISCONF), "MISCONF"),
        (in_pipeline(BaseParser.parse_error(MISCONF), 1, "ZADD k 1 m"), "MISCONF"),
        # the command's own text may hold the mark and a code: the reply is after the last one
        (
            in_pipeline(
                BaseParser.parse_error("BUSY a script"), 2, "SET k ' of pipeline caused error: OK'"
            ),
            "BUSY",
        ),
    ],
)
def test_the_error_code_is_the_replys_first_word_in_a_pipeline_too(exc, code):
    assert error_code(exc) == code


@pytest.mark.parametrize(
    "exc",
    [
        BaseParser.parse_error(MISCONF),
        in_pipeline(BaseParser.parse_error(MISCONF), 3, "HSET h f v"),
        BaseParser.parse_error("OOM command not allowed when used memory > 'maxmemory'."),
        BaseParser.parse_error("READONLY You can't write against a read only replica."),
    ],
)
def test_a_database_refusing_writes_is_writes_refused(exc):
    with pytest.raises(WritesRefused, match="not accepting writes right now"), database_errors():
        raise exc


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (HandshakeFailed(HANDSHAKE_REFUSED), re.escape(HANDSHAKE_REFUSED)),
        (redis.exceptions.InvalidResponse("Protocol Error: H"), "does not answer in the Redis"),
        (BaseParser.parse_error("WRONGPASS invalid username-password pair"), "credentials"),
    ],
)
def test_a_database_that_answers_but_cannot_be_used_is_database_refused(exc, message):
    with pytest.raises(DatabaseRefused, match=message) as caught, database_errors():
        raise exc
    assert isinstance(caught.value, DatabaseUnavailable)
    assert "WRONGPASS" not in caught.value.message and "pair" not in caught.value.message
