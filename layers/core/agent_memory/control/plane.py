"""The control plane: organizations, API keys and database instances, as one object for the
tools and the functions that manage them.

``ControlPlane`` is made of three collaborators that share the control database
(``ControlDatabase``): ``Organizations``, ``ApiKeys`` and ``InstanceRegistry``. It forwards
each operation to the one that owns it and does itself the one that spans them: deleting an
organization (its keys at once, then each of its instances).
"""

from __future__ import annotations

import redis

from agent_memory.clock import Clock
from agent_memory.control.api_keys import ApiKeyInfo, ApiKeys
from agent_memory.control.database import ControlDatabase
from agent_memory.control.instances import DEFAULT_RELEASE_HOLD_SECONDS, InstanceRegistry
from agent_memory.control.key_models import KeyCreate, KeyCreated
from agent_memory.control.models import (
    ORG_ID,
    Instance,
    OrganizationDeletion,
    Registration,
    Removal,
    check_id,
)
from agent_memory.control.organizations import Organizations
from agent_memory.errors import Conflict, NotFound
from agent_memory.models import Principal

_ATTEMPTS = 5


class ControlPlane:
    """Reads and writes the control database. Errors: ``Unauthorized``, ``InstanceNotFound``,
    ``NotFound``, ``ValidationFailed``, ``InstanceConflict``, ``DatabaseUnavailable``.

    ``instance_cache_seconds`` and ``release_hold_seconds``: see ``InstanceRegistry``."""

    def __init__(
        self,
        client: redis.Redis,
        clock: Clock,
        instance_cache_seconds: float = 0,
        *,
        release_hold_seconds: float = DEFAULT_RELEASE_HOLD_SECONDS,
    ) -> None:
        self.database = ControlDatabase(client)
        self.organizations = Organizations(self.database, clock)
        self.api_keys = ApiKeys(self.database, clock, self.organizations)
        self.registry = InstanceRegistry(
            self.database,
            clock,
            self.organizations,
            instance_cache_seconds,
            release_hold_seconds=release_hold_seconds,
        )

    @property
    def _redis(self) -> redis.Redis:
        """The control database's client (its layout checked)."""
        return self.database.redis

    # organizations

    def create_organization(self, org_id: str, name: str | None = None) -> bool:
        """Create ``org_id`` if new; returns True when it was created. ``ValidationFailed``
        for an id that is not 1-64 letters, digits, '_' or '-'."""
        check_id(ORG_ID, "organization id", org_id)
        return self.organizations.create(org_id, name)

    def list_organizations(self) -> list[str]:
        """Every organization id, sorted."""
        return self.organizations.ids()

    def organization_exists(self, org_id: str) -> bool:
        """Whether ``org_id`` exists."""
        return self.organizations.exists(org_id)

    def delete_organization(self, org_id: str) -> OrganizationDeletion:
        """Delete ``org_id``: the organization and all its API keys at once (one script: the
        next request with any of them is a 401), then each of its instances as
        ``remove_instance`` does (the data in their databases stays). Running it again after
        a failure half-way finishes the job. ``NotFound`` when there is nothing of
        ``org_id``."""
        check_id(ORG_ID, "organization id", org_id)
        for _ in range(_ATTEMPTS):
            exists = self.organizations.exists(org_id)
            keys = self.api_keys.hashes(org_id)
            instance_ids = self.registry.ids(org_id)
            if not (exists or keys or instance_ids):
                raise NotFound(f"Organization '{org_id}' does not exist.")
            key_ids = sorted(keys)
            revoked = self.organizations.remove_with_keys(
                org_id, key_ids, [keys[k] for k in key_ids]
            )
            if revoked >= 0:
                break
        else:
            raise Conflict(f"Organization '{org_id}' kept changing; retry.")
        removed = []
        for instance_id in instance_ids:
            try:
                removed.append(self.registry.remove(org_id, instance_id))
            except NotFound:
                continue
        self.registry.forget_organization(org_id)
        return OrganizationDeletion(org_id, revoked, removed)

    # API keys

    def issue_api_key(self, org_id: str) -> tuple[str, str]:
        """``ApiKeys.issue``: ``(key_id, api_key)``, the key shown once."""
        return self.api_keys.issue(org_id)

    def create_api_key(self, org_id: str, body: KeyCreate) -> KeyCreated:
        """``ApiKeys.create``: a scoped key of ``org_id`` (its instances checked), shown once;
        ``NotFound`` without the organization."""
        self.organizations.require(org_id)
        return self.api_keys.create(org_id, body, {i.instance_id for i in self.instances(org_id)})

    def register_api_key(self, org_id: str, api_key: str) -> str:
        """``ApiKeys.register``: accept a caller-chosen key; returns its key id."""
        return self.api_keys.register(org_id, api_key)

    def revoke_api_key(self, org_id: str, key_id: str, by: str | None = None) -> None:
        """``ApiKeys.revoke``: the next request with that key is a 401 (``by``: the request's
        own key, which must still be the organization's)."""
        self.api_keys.revoke(org_id, key_id, by)

    def list_api_keys(self, org_id: str) -> list[ApiKeyInfo]:
        """``ApiKeys.of``: key ids and creation times, oldest first."""
        return self.api_keys.of(org_id)

    def authenticate(self, api_key: str | None) -> Principal:
        """``ApiKeys.authenticate``: the principal behind ``api_key``, else ``Unauthorized``."""
        return self.api_keys.authenticate(api_key)

    # instances

    def register_instance(
        self, org_id: str, instance_id: str, url: str, *, allow_unreachable: bool = False
    ) -> Registration:
        """``InstanceRegistry.register_instance``."""
        return self.registry.register_instance(
            org_id, instance_id, url, allow_unreachable=allow_unreachable
        )

    def remove_instance(self, org_id: str, instance_id: str) -> Removal:
        """``InstanceRegistry.remove_instance``."""
        return self.registry.remove_instance(org_id, instance_id)

    def marker_is_current(self, org_id: str, instance_id: str, token: str) -> bool:
        """``InstanceRegistry.marker_is_current``."""
        return self.registry.marker_is_current(org_id, instance_id, token)

    def instance(self, org_id: str, instance_id: str) -> Instance:
        """``InstanceRegistry.instance``: the instance if it is ``org_id``'s, else
        ``InstanceNotFound``."""
        return self.registry.instance(org_id, instance_id)

    def instance_by_id(self, instance_id: str) -> Instance:
        """``InstanceRegistry.instance_by_id`` (internal callers only)."""
        return self.registry.instance_by_id(instance_id)

    def instances(self, org_id: str) -> list[Instance]:
        """``InstanceRegistry.instances``: the instances of ``org_id``, by id."""
        return self.registry.instances(org_id)

    def list_instances(self, org_id: str) -> list[Instance]:
        """The instances of ``org_id``, by id, as ``instances`` reads them; ``NotFound``
        without the organization (where ``instances`` answers [])."""
        self.organizations.require(org_id)
        return self.registry.instances(org_id)
