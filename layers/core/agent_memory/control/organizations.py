"""Organizations in the control database: create, list, look up, and remove one with all its API
keys in one step (``ControlPlane.delete_organization`` then removes its instances)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_memory.clock import Clock, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import ControlKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import NotFound

if TYPE_CHECKING:
    from agent_memory.control.database import ControlDatabase

_DELETE_ORG = """
-- KEYS: organizations, the org's key hash, then the record of each of its API keys
-- ARGV: org, then the key id of each record, in the same order
local ids = redis.call('HKEYS', KEYS[2])
if #ids ~= #ARGV - 1 then return -1 end
local given = {}
for i = 2, #ARGV do given[ARGV[i]] = true end
for _, id in ipairs(ids) do
  if not given[id] then return -1 end
end
redis.call('HDEL', KEYS[1], ARGV[1])
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[2])
return #KEYS - 2
"""


class Organizations:
    """The organizations of the control database. Errors: ``NotFound``, ``ValidationFailed``,
    ``DatabaseUnavailable``."""

    def __init__(self, database: ControlDatabase, clock: Clock) -> None:
        self._database = database
        self._clock = clock

    def create(self, org_id: str, name: str | None = None) -> bool:
        """Create ``org_id`` (its id already checked) if new; True when it was created."""
        doc = json.dumps({"name": name or org_id, "created_at": to_ms(self._clock.now())})
        with database_errors():
            return bool(self._database.redis.hsetnx(ControlKeys.organizations, org_id, doc))

    def ids(self) -> list[str]:
        """Every organization id, sorted."""
        with database_errors():
            return sorted(str(o) for o in self._database.redis.hkeys(ControlKeys.organizations))

    def exists(self, org_id: str) -> bool:
        """Whether ``org_id`` exists in the control database."""
        with database_errors():
            return bool(self._database.redis.hexists(ControlKeys.organizations, org_id))

    def require(self, org_id: str) -> None:
        """``NotFound`` (saying to create it) unless ``org_id`` exists."""
        if not self.exists(org_id):
            raise NotFound(f"Organization '{org_id}' does not exist; create it first.")

    def remove_with_keys(self, org_id: str, key_ids: list[str], key_hashes: list[str]) -> int:
        """Remove ``org_id`` and the API keys it has, in one script, if its keys are exactly
        ``key_ids`` (whose records are ``key_hashes``, in the same order); returns how many
        were revoked, or -1 when its keys changed meanwhile (read them again and retry)."""
        script = load_script(self._database.redis, _DELETE_ORG)
        records = [ControlKeys.api_key(digest) for digest in key_hashes]
        with database_errors():
            revoked = int(
                script(
                    keys=[ControlKeys.organizations, ControlKeys.org_keys(org_id), *records],
                    args=[org_id, *key_ids],
                )
            )
            if revoked >= 0:
                self._database.redis.delete(ControlKeys.org_key_expiry(org_id))
        return revoked
