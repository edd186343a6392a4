"""The control database as the control plane's parts share it: one client, whose keys are known
to be in the current layout once ``redis`` has been read (an upgrade made once per process)."""

from __future__ import annotations

import redis

from agent_memory.database.client import database_errors, is_cluster
from agent_memory.database.keys import ControlKeys, legacy_control_key


class ControlDatabase:
    """The control database's client, shared by ``Organizations``, ``ApiKeys`` and
    ``InstanceRegistry``. ``DatabaseUnavailable`` from ``redis`` while the layout is checked."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._layout_checked = False

    @property
    def redis(self) -> redis.Redis:
        """The control database's client, once its keys are known to be in the current layout
        (checked at the first use in this process: ``_upgrade_layout``)."""
        if not self._layout_checked:
            self._upgrade_layout()
            self._layout_checked = True
        return self._client

    def _upgrade_layout(self) -> None:
        """Rename the control keys written before they had the ``{control}`` hash tag
        (``database.keys.legacy_control_key``) to their current names, once per control database:
        the ``layout`` key says it was done. One GET when it was.

        Only on a single node, where such keys can exist (nothing worked on a cluster before
        the tag) and where RENAMENX takes a key to any name; a key whose new name already
        exists is left as it is. The rename is made before the first read of this process, so
        a container never reads the current names while the data is under the old ones.
        ``DatabaseUnavailable``."""
        client = self._client
        with database_errors():
            if client.get(ControlKeys.layout) is not None:
                return
            if not is_cluster(client):
                for key in list(client.scan_iter(match=ControlKeys.legacy_pattern, count=500)):
                    new = legacy_control_key(str(key))
                    if new is not None:
                        client.renamenx(key, new)
            client.set(ControlKeys.layout, "2")
