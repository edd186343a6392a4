"""Every store of an organization, across its instances (``GET /agent-memory``), and any other
read of every instance of an organization (``read_instances``: the organization's usage).

The instances are read concurrently, one thread each (at most ``MAX_PARALLEL`` at a time), and
the listing waits at most ``WAIT_SECONDS`` for them: an instance that cannot be reached, fails,
or has not answered by then is listed in ``unreachable`` instead of failing the whole answer.
Only a control database that cannot be reached fails it (503).

Worst case: with the database client's 2 s connect and 2 s socket timeouts (``database/client.py``),
a dead instance costs about 2 s (a refused connection much less); a database that accepts
connections and then answers slowly could cost more, which ``WAIT_SECONDS`` bounds. So a listing
with N unreachable instances takes at most about ``WAIT_SECONDS`` (5 s) plus the control database's
look-ups, whatever N is; one reading them one after another would take N x 2 s or more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

from agent_memory.control.models import Instance
from agent_memory.errors import Conflict, DatabaseUnavailable, InstanceNotFound
from agent_memory.stores.models import OrganizationStoreList, StoreView, UnreachableInstance
from agent_memory.stores.registry import Stores

WAIT_SECONDS = 5.0
"""How long the listing waits for the instances, all together."""
MAX_PARALLEL = 16
"""Instances read at the same time (threads)."""
T = TypeVar("T")


def _views(stores: Stores) -> list[StoreView]:
    return [stores.view(config) for config in stores.all()]


def list_organization_stores(
    instances: Sequence[Instance],
    open_stores: Callable[[Instance], Stores],
    *,
    wait_seconds: float = WAIT_SECONDS,
) -> OrganizationStoreList:
    """The stores of ``instances`` (``ControlPlane.instances``), with those that could not be
    read in ``unreachable``, both by instance id (``read_instances``)."""
    read, unreachable = read_instances(instances, open_stores, _views, wait_seconds=wait_seconds)
    stores = [view for _, views in read for view in views]
    return OrganizationStoreList(stores=stores, unreachable=unreachable)


def read_instances(
    instances: Sequence[Instance],
    open_stores: Callable[[Instance], Stores],
    read: Callable[[Stores], T],
    *,
    wait_seconds: float = WAIT_SECONDS,
) -> tuple[list[tuple[Stores, T]], list[UnreachableInstance]]:
    """``read`` of each of ``instances``' stores, concurrently (module docstring): what each
    instance that answered gave, and the instances that could not be read.

    ``open_stores`` gives an instance's ``Stores``; it is called here, on the calling thread, and
    may look the instance up in the control database: its ``DatabaseUnavailable`` fails the
    read, and an instance removed meanwhile (``InstanceNotFound``) is left out, as is one whose
    database turns out not to be its registration's (``InstanceNotFound`` from the database's
    ownership marker). Only ``read`` runs on the threads. An instance whose database cannot be
    used is listed as unreachable with the reason: ``DatabaseUnavailable`` (``DatabaseRefused``
    included: a refused handshake, credentials or database number, not the Redis protocol) and
    ``Conflict`` (a cluster URL with a database number, ``database.client.redis_client``); so is
    one that has not answered within ``wait_seconds``. Other errors from an instance (a bug, a
    ``NOPERM`` reply) are raised, as for any route.
    """
    opened: list[Stores] = []
    for instance in instances:
        try:
            opened.append(open_stores(instance))
        except InstanceNotFound:
            continue
    answered: list[tuple[Stores, T]] = []
    unreachable: list[UnreachableInstance] = []
    if not opened:
        return answered, unreachable
    pool = ThreadPoolExecutor(
        max_workers=min(MAX_PARALLEL, len(opened)), thread_name_prefix="read-instances"
    )
    try:
        futures: list[Future[T]] = [pool.submit(read, s) for s in opened]
        late = wait(futures, timeout=wait_seconds).not_done
    finally:
        # Threads still connecting end on their own within the client's timeouts; the ones
        # that have not started are cancelled.
        pool.shutdown(wait=False, cancel_futures=True)
    for instance_stores, future in zip(opened, futures, strict=True):
        if future in late:
            unreachable.append(
                UnreachableInstance(
                    instance_id=instance_stores.instance_id,
                    message=f"The database did not answer within {wait_seconds:g} s; "
                    "retry in a moment.",
                )
            )
            continue
        try:
            answered.append((instance_stores, future.result()))
        except InstanceNotFound:
            continue  # its database is not this registration's (Instance.guard): left out
        except (DatabaseUnavailable, Conflict) as exc:  # Conflict: a cluster asked for db N
            unreachable.append(
                UnreachableInstance(instance_id=instance_stores.instance_id, message=exc.message)
            )
    return answered, unreachable
