"""The normalized address of an instance URL: every spelling of one database gives one address."""

import pytest

from agent_memory.control.ownership import database_address
from agent_memory.errors import ValidationFailed


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("redis://cache.example.com", "redis://cache.example.com:6379/0"),
        ("redis://Cache.Example.COM.:6379/0", "redis://cache.example.com:6379/0"),
        ("rediss://user:pass@cache.example.com:6379", "redis://cache.example.com:6379/0"),
        ("redis://cache.example.com/0?db=0", "redis://cache.example.com:6379/0"),
        ("redis://cache.example.com:6379/", "redis://cache.example.com:6379/0"),
        ("redis://cache.example.com/3", "redis://cache.example.com:6379/3"),
        ("redis://cache.example.com/0?db=3", "redis://cache.example.com:6379/3"),
        ("redis://cache.example.com/abc", "redis://cache.example.com:6379/0"),
        ("redis://cache.example.com:0", "redis://cache.example.com:6379/0"),
        ("redis://cache.example.com:6380/1", "redis://cache.example.com:6380/1"),
        ("redis://bücher.example", "redis://xn--bcher-kva.example:6379/0"),
        ("redis://localhost", "redis://localhost:6379/0"),
        ("redis://db.localhost", "redis://localhost:6379/0"),
        ("redis://127.0.0.1", "redis://localhost:6379/0"),
        ("redis://127.8.9.10", "redis://localhost:6379/0"),
        ("redis://127.1", "redis://localhost:6379/0"),
        ("redis://0x7f.0.0.1", "redis://localhost:6379/0"),
        ("redis://2130706433", "redis://localhost:6379/0"),
        ("redis://0.0.0.0", "redis://localhost:6379/0"),
        ("redis://[::1]", "redis://localhost:6379/0"),
        ("redis://[0:0:0:0:0:0:0:1]", "redis://localhost:6379/0"),
        ("redis://[::]", "redis://localhost:6379/0"),
        ("redis://[::ffff:127.0.0.1]", "redis://localhost:6379/0"),
        ("redis://%6Cocalhost", "redis://localhost:6379/0"),
        ("redis:///2?host=localhost", "redis://localhost:6379/2"),
        ("redis://", "redis://localhost:6379/0"),
        ("redis://10.0.0.5:6379/0", "redis://10.0.0.5:6379/0"),
        ("redis://[::ffff:10.0.0.5]", "redis://10.0.0.5:6379/0"),
        ("redis://[2001:DB8:0:0::1]:7000/2", "redis://[2001:db8::1]:7000/2"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock?db=0"),
        ("unix://user:pw@/run//./x/../redis.sock?db=4", "unix:///run/redis.sock?db=4"),
    ],
)
def test_every_spelling_of_a_database_has_one_address(url, address):
    assert database_address(url) == address


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://cache", "An instance URL must start with redis://, rediss:// or unix://."),
        ("REDIS://cache", "An instance URL must start with redis://, rediss:// or unix://."),
        ("redis://cache/-2", "The database number of an instance URL must be 0 or more."),
        ("redis://cache:99999", "The instance URL cannot be read: Port out of range 0-65535"),
        (
            "redis://cache/0?db=one",
            "The instance URL cannot be read: Invalid value for 'db' in connection URL.",
        ),
        ("unix://", "A unix:// instance URL must name the socket's path."),
        ("redis://.", "An instance URL must name a host."),
    ],
)
def test_urls_that_name_no_database_are_refused(url, message):
    with pytest.raises(ValidationFailed) as refused:
        database_address(url)
    assert refused.value.message == message


def test_a_refusal_never_repeats_the_password():
    with pytest.raises(ValidationFailed) as refused:
        database_address("redis://user:hunter2@cache:port/0")
    assert "hunter2" not in refused.value.message
