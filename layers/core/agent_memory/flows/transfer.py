"""The use cases of export and import: a store's memories page by page, its session ids, one
session's state and messages, and writing them back (``tools.transfer`` drives them).

Each reads or writes the whole store, so a key limited to actors may not
(``reach.whole_store``); an import counts what it adds towards the daily quotas first.
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.background.triggers import arm_reserved
from agent_memory.errors import ValidationFailed
from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.flows.quota import reserve
from agent_memory.memories.profile_models import (
    ProfileExportPage,
    ProfileImportBatch,
    ProfileImportResult,
    checked_value,
)
from agent_memory.memories.transfer_models import (
    MemoryExportPage,
    MemoryImportBatch,
    MemoryImportResult,
)
from agent_memory.observability import metrics
from agent_memory.sessions.transfer import (
    SessionExport,
    SessionIdPage,
    SessionImport,
    SessionImported,
)


def memory_export_page(store: StoreHandle, cursor: str | None, limit: int) -> MemoryExportPage:
    """About ``limit`` live memories from ``cursor`` on, within the answer's byte budget
    (``MemoryTransfer.export``)."""
    reach.whole_store(store, "export memories")
    budget = store.container.answer_budget_bytes
    return store.memory_transfer.export(cursor, limit, budget=budget)


def import_memory_batch(store: StoreHandle, batch: MemoryImportBatch) -> MemoryImportResult:
    """Keep each memory of ``batch`` as exported (``MemoryTransfer.import_batch``), counted
    towards the daily quota first. Metric ``MemoriesImported``."""
    reach.whole_store(store, "import memories")
    reserve(store, "memories", len(batch.memories))
    result = store.memory_transfer.import_batch(batch)
    metrics.add_metric(name="MemoriesImported", unit=MetricUnit.Count, value=result.imported)
    return result


def export_session_ids(store: StoreHandle, cursor: str | None, limit: int) -> SessionIdPage:
    """About ``limit`` live session ids from ``cursor`` on (``SessionTransfer.ids``)."""
    reach.whole_store(store, "export sessions")
    return store.session_transfer.ids(cursor, limit)


def session_export_page(
    store: StoreHandle, session_id: str, after_seq: int, limit: int
) -> SessionExport:
    """The session's state and its messages after ``after_seq``, within the answer's byte
    budget (``SessionTransfer.export``)."""
    reach.whole_store(store, "export sessions")
    budget = store.container.answer_budget_bytes
    return store.session_transfer.export(session_id, after_seq, limit, budget=budget)


def import_session_page(
    store: StoreHandle, session_id: str, page: SessionImport
) -> SessionImported:
    """Write a page of an exported session (``SessionTransfer.import_page``), its messages
    counted towards the daily quota first; when its messages are not all read and the store
    has a language model, arm its extraction as an append does. Metric
    ``MessagesImported``."""
    reach.whole_store(store, "import sessions")
    reserve(store, "messages", len(page.messages))
    outcome = store.session_transfer.import_page(session_id, page)
    if outcome.arm_due is not None:
        scheduler = store.container.scheduler
        arm_reserved(scheduler, store.sessions, store.target(session_id), outcome.arm_due)
    added = outcome.result.messages_added
    metrics.add_metric(name="MessagesImported", unit=MetricUnit.Count, value=added)
    return outcome.result


def profile_export_page(store: StoreHandle, cursor: str | None, limit: int) -> ProfileExportPage:
    """About ``limit`` actors' profiles, with their histories, from ``cursor`` on, within the
    answer's byte budget (``Profiles.export_page``)."""
    reach.whole_store(store, "export profiles")
    return store.profiles.export_page(cursor, limit, store.container.answer_budget_bytes)


def import_profile_batch(store: StoreHandle, batch: ProfileImportBatch) -> ProfileImportResult:
    """Write each profile of ``batch`` as exported (``Profiles.import_profile``), all checked
    first: every field one of the store's ``profile_fields`` and every value, current or past,
    of its type (``ValidationFailed`` naming ``profiles.<i>.fields.<name>`` or
    ``profiles.<i>.history.<name>.<j>``, nothing written)."""
    reach.whole_store(store, "import profiles")
    declared = {f.name: f for f in store.config.profile_fields}
    problems: list[dict[str, str]] = []
    for at, profile in enumerate(batch.profiles):
        named = [(f"fields.{n}", n, [e]) for n, e in profile.fields.items()]
        named += [(f"history.{n}", n, versions) for n, versions in profile.history.items()]
        for where, name, entries in named:
            field = declared.get(name)
            for place, entry in enumerate(entries):
                path = f"profiles.{at}.{where}" + (f".{place}" if where.startswith("h") else "")
                if field is None:
                    problems.append({"field": path, "problem": "not a profile field of this store"})
                    break
                if entry.value is None:
                    continue
                try:
                    checked_value(field, entry.value)
                except ValueError as exc:
                    problems.append({"field": path, "problem": f"{field.type}: {exc}"})
    if problems:
        raise ValidationFailed("Some profiles are not valid; see details.", details=problems)
    for profile in batch.profiles:
        store.profiles.import_profile(profile)
    return ProfileImportResult(imported=len(batch.profiles))
