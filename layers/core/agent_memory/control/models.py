"""The records of the control plane: an instance, what a registration or a removal did, what
an organization's deletion did, and the id rules of organizations and instances."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from agent_memory.control.ownership import MarkerRelease, marker_value
from agent_memory.database.connections import OwnerGuard
from agent_memory.database.keys import PROBE_KEY, InstanceKeys
from agent_memory.errors import ValidationFailed

ORG_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
INSTANCE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


@dataclass(frozen=True)
class Instance:
    """A database instance: its id, owning organization and connection URL (may hold a
    password), and the token of its registration ('' for one made before ownership markers)."""

    instance_id: str
    org_id: str
    url: str
    created_at: datetime
    token: str = ""

    @property
    def guard(self) -> OwnerGuard | None:
        """What its database must hold to be used for it: its registration's ownership marker
        (``database.connections.OwnerGuard``; checked on every new connection), or None for a
        registration from before markers, whose database is used unchecked."""
        if not self.token:
            return None
        return OwnerGuard(
            InstanceKeys.owner,
            marker_value(self.org_id, self.instance_id, self.token),
            self.instance_id,
            frozenset({InstanceKeys.owner, PROBE_KEY}),
        )


@dataclass(frozen=True)
class Registration:
    """What ``register_instance`` did.

    ``created``: a new instance (False: the organization's existing one, re-pointed or
    unchanged); ``address``: the normalized address of its database; ``released``: the address
    it left when it was re-pointed to another database, else None; ``marked``: the ownership
    marker is in the database (False when the database could not be reached or refused the
    write: the registration stands, guarded by its address only); ``warnings``: instances
    registered before the address index that share a database (see ``_index_existing``);
    ``released_marker``: what became of the ownership marker in the database it left (None
    when it left none).
    """

    instance_id: str
    created: bool
    address: str
    released: str | None
    marked: bool
    warnings: list[str] = field(default_factory=list)
    released_marker: MarkerRelease | None = None


@dataclass(frozen=True)
class Removal:
    """What ``remove_instance`` did: the instance, its URL (may hold a password) and address,
    and what became of its ownership marker in the database (``MarkerRelease``; a marker left
    there, its registration gone, is replaced by the next registration)."""

    instance_id: str
    url: str
    address: str
    marker: MarkerRelease


def check_id(pattern: re.Pattern[str], kind: str, value: str) -> None:
    """``ValidationFailed`` unless ``value`` (an organization or instance id) fits ``pattern``."""
    if not pattern.fullmatch(value):
        raise ValidationFailed(f"{kind} '{value}' must be 1-64 letters, digits, '_' or '-'.")


@dataclass(frozen=True)
class OrganizationDeletion:
    """What ``delete_organization`` did: how many API keys it revoked, and the instances it
    removed."""

    org_id: str
    keys_revoked: int
    removed: list[Removal]
