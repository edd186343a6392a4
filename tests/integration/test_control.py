"""Organizations, API keys and instances on a real Redis server."""

import subprocess
import sys
import time

import pytest

from agent_memory.clock import SystemClock
from agent_memory.control import ControlPlane, hash_api_key
from agent_memory.errors import InstanceNotFound, NotFound, Unauthorized, ValidationFailed
from tests.conftest import ROOT, unique


def test_a_key_authenticates_as_its_organization(tenant):
    principal = tenant.control.authenticate(tenant.api_key)
    assert (principal.org_id, principal.key_id) == (tenant.org_id, tenant.key_id)


@pytest.mark.parametrize("key", [None, "", "kvm_wrong", "x" * 600])
def test_missing_or_wrong_keys_are_unauthorized(tenant, key):
    with pytest.raises(Unauthorized):
        tenant.control.authenticate(key)


def test_only_a_hash_of_the_key_is_stored(tenant, client):
    for key in client.scan_iter(match="kividb:control:*"):
        kind = client.type(key)
        values = (
            client.hgetall(key).values()
            if kind == "hash"
            else client.smembers(key)
            if kind == "set"
            else []
        )
        assert all(tenant.api_key not in str(v) for v in values)
        assert tenant.api_key not in key
    assert client.exists(f"kividb:control:apikey:{hash_api_key(tenant.api_key)}")


def test_revoked_keys_stop_working_at_once(tenant):
    tenant.control.revoke_api_key(tenant.org_id, tenant.key_id)
    with pytest.raises(Unauthorized):
        tenant.control.authenticate(tenant.api_key)
    with pytest.raises(NotFound):
        tenant.control.revoke_api_key(tenant.org_id, tenant.key_id)


def test_another_organizations_instance_is_indistinguishable_from_none(tenant):
    other = unique("org")
    tenant.control.create_organization(other)
    with pytest.raises(InstanceNotFound) as theirs:
        tenant.control.instance(other, tenant.instance_id)
    with pytest.raises(InstanceNotFound) as missing:
        tenant.control.instance(other, "no-such-instance")
    assert theirs.value.code == missing.value.code
    assert [i.instance_id for i in tenant.control.instances(other)] == []


def test_instance_ids_cannot_be_taken_over(tenant):
    other = unique("org")
    tenant.control.create_organization(other)
    with pytest.raises(ValidationFailed, match="taken"):
        tenant.control.register_instance(other, tenant.instance_id, "redis://attacker:6379/0")
    assert tenant.control.instance(tenant.org_id, tenant.instance_id).url == tenant.url


def test_a_chosen_key_registers_once_and_cannot_move_organizations(tenant):
    chosen = "local-dev-key-" + unique("k")
    first = tenant.control.register_api_key(tenant.org_id, chosen)
    assert tenant.control.register_api_key(tenant.org_id, chosen) == first
    other = unique("org")
    tenant.control.create_organization(other)
    with pytest.raises(ValidationFailed):
        tenant.control.register_api_key(other, chosen)
    with pytest.raises(ValidationFailed):
        tenant.control.register_api_key(tenant.org_id, "short")


def _admin(redis_url, *args):
    return subprocess.run(
        [sys.executable, "-m", "tools.admin", "--control-url", redis_url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_admin_command_creates_issues_registers_and_revokes(redis_url, tenant):
    org = unique("org")
    assert _admin(redis_url, "create-org", org).returncode == 0
    issued = _admin(redis_url, "issue-key", org)
    assert issued.returncode == 0
    key = issued.stdout.split("API key: ")[1].split()[0]
    key_id = issued.stdout.split("key id:  ")[1].split()[0]
    assert tenant.control.authenticate(key).org_id == org
    url = redis_url.replace("redis://", "redis://user:hunter2@")
    assert _admin(redis_url, "register-instance", org, unique("db"), url).returncode == 0
    listed = _admin(redis_url, "list-instances", org)
    assert "hunter2" not in listed.stdout and "***" in listed.stdout
    assert key_id in _admin(redis_url, "list-keys", org).stdout
    assert _admin(redis_url, "revoke-key", org, key_id).returncode == 0
    with pytest.raises(Unauthorized):
        tenant.control.authenticate(key)
    refused = _admin(redis_url, "revoke-key", org, key_id)
    assert refused.returncode == 1 and "not_found" in refused.stderr


def test_found_instances_are_cached_for_the_configured_time_and_missing_ones_never(tenant):
    cached = ControlPlane(tenant.control._redis, SystemClock(), instance_cache_seconds=0.5)
    assert cached.instance(tenant.org_id, tenant.instance_id).url == tenant.url
    tenant.control.register_instance(tenant.org_id, tenant.instance_id, "redis://elsewhere:1/0")
    assert cached.instance(tenant.org_id, tenant.instance_id).url == tenant.url
    time.sleep(0.6)
    assert cached.instance(tenant.org_id, tenant.instance_id).url == "redis://elsewhere:1/0"
    later = unique("db")
    with pytest.raises(InstanceNotFound):
        cached.instance(tenant.org_id, later)
    tenant.control.register_instance(tenant.org_id, later, tenant.url)
    assert cached.instance(tenant.org_id, later).url == tenant.url
    with pytest.raises(InstanceNotFound):
        cached.instance(unique("org"), tenant.instance_id)
