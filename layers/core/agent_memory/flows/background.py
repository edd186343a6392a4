"""The background function's use case: one run of extraction and summarization for one
session (``run_event``), what it did counted in the store's usage, told to its webhooks, and
reported as metrics and one log line.

A run that fails on a provider records the error on the session and the store and arms its
own retry (``background.work``); one that cannot reach the database raises, so that Lambda's
asynchronous retries (and the scheduler's retry policy) try again.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from agent_memory.background.runs import RunBudget, RunReport
from agent_memory.background.scheduler import (
    CONSOLIDATION_KIND,
    ConsolidationTarget,
    ExtractionTarget,
)
from agent_memory.flows.access import store_for_run
from agent_memory.flows.consolidation import note_kept, run_consolidation
from agent_memory.flows.container import Container
from agent_memory.flows.handle import StoreHandle
from agent_memory.observability import logger, metrics

REPORT_METRICS = {
    "kept": "MemoriesKept",
    "deduplicated": "MemoriesDeduplicated",
    "superseded": "MemoriesSuperseded",
    "ignored_supersedes": "SupersedesIgnored",
    "redacted": "IdentifiersRedacted",
    "read_messages": "MessagesExtracted",
    "folded_messages": "MessagesSummarized",
    "model_calls": "ModelCalls",
    "input_tokens": "ModelInputTokens",
    "output_tokens": "ModelOutputTokens",
    "schedule_calls": "ScheduleCalls",
    "profile_updated": "ProfileFieldsUpdated",
    "profile_dropped": "ProfileValuesDropped",
}
"""The metric of each count of a run's report (``RunReport``), added when not zero."""


def run_event(container: Container, event: dict[str, Any], remaining_ms: int) -> dict[str, Any]:
    """The run ``event`` asks for (``{"kind": "extraction", "instance_id", "store",
    "session_id"}``, or ``{"kind": "consolidation", ..., "actor_id"}``:
    ``flows.consolidation.run_consolidation``) within ``remaining_ms`` of the function's time:
    ``{"outcome": "invalid"}`` for another event, ``{"outcome": "gone"}`` when its instance or
    store is gone, else the run's counts and outcome (``RunReport`` without the memories kept;
    never a secret)."""
    try:
        if isinstance(event, dict) and event.get("kind") == CONSOLIDATION_KIND:
            return _consolidation_event(container, event, remaining_ms)
        try:
            target = ExtractionTarget.from_event(event)
        except ValueError as exc:
            logger.error("not a background event", extra={"problem": str(exc)})
            return {"outcome": "invalid"}
        logger.append_keys(store=target.store, session_id=target.session_id)
        store = store_for_run(container, target)
        if store is None:
            logger.info("the instance or store is gone; nothing to do")
            return {"outcome": "gone"}
        report = run_background(store, target, RunBudget.from_remaining(remaining_ms))
        return _reported(report)
    finally:
        if is_metrics_disabled():
            metrics.clear_metrics()


def _consolidation_event(
    container: Container, event: dict[str, Any], remaining_ms: int
) -> dict[str, Any]:
    """``run_event`` of a consolidation event."""
    try:
        target = ConsolidationTarget.from_event(event)
    except ValueError as exc:
        logger.error("not a background event", extra={"problem": str(exc)})
        return {"outcome": "invalid"}
    logger.append_keys(store=target.store)
    store = store_for_run(container, target)
    if store is None:
        logger.info("the instance or store is gone; nothing to do")
        return {"outcome": "gone"}
    answer = run_consolidation(store, target, RunBudget.from_remaining(remaining_ms))
    logger.info("consolidation run", extra=answer)
    return answer


def run_background(store: StoreHandle, target: ExtractionTarget, budget: RunBudget) -> RunReport:
    """One background run of ``target`` (``StoreHandle.session_work``); what it did is counted
    in the store's usage and told to its webhooks (``memory.created``, ``memory.superseded``,
    ``extraction.completed`` or ``extraction.failed``), then both are sent
    (``StoreHandle.flush``: ``DatabaseUnavailable`` when they cannot be)."""
    report = store.session_work(target).run(budget)
    extracted = report.extraction_runs or (report.outcome == "failed")
    effects = store.effects
    effects.count(
        {
            "memories_added": report.kept,
            "memories_superseded": report.superseded,
            "extraction_runs": int(extracted),
            "summarization_runs": report.summarization_runs,
            "llm_input_tokens": report.input_tokens,
            "llm_output_tokens": report.output_tokens,
            "profile_updates": report.profile_updated,
        }
    )
    for event, data in report.events:
        effects.tell(event, {**data, "session_id": target.session_id})
    kept_by_actor: dict[str, int] = {}
    for event, data in report.events:
        actor = data.get("memory", {}).get("actor_id") if event == "memory.created" else None
        if actor is not None:
            kept_by_actor[actor] = kept_by_actor.get(actor, 0) + 1
    for actor, kept in kept_by_actor.items():
        note_kept(store, actor, kept)
    if report.outcome == "failed":
        effects.tell("extraction.failed", {"session_id": target.session_id, "error": report.error})
    elif report.extraction_runs:
        effects.tell(
            "extraction.completed",
            {
                "session_id": target.session_id,
                "messages_read": report.read_messages,
                "memories_kept": report.kept,
                "memories_deduplicated": report.deduplicated,
                "memories_superseded": report.superseded,
                "profile_fields_updated": report.profile_updated,
                "profile_values_dropped": report.profile_dropped,
            },
        )
    store.flush()
    return report


def _reported(report: RunReport) -> dict[str, Any]:
    """The run's metrics (``REPORT_METRICS``, ``BackgroundRuns``, ``BackgroundFailures``), its
    log line and the function's answer: counts and our own error text, never the memories kept
    (``events``)."""
    metrics.add_metric(name="BackgroundRuns", unit=MetricUnit.Count, value=1)
    if report.outcome == "failed":
        metrics.add_metric(name="BackgroundFailures", unit=MetricUnit.Count, value=1)
    for field, name in REPORT_METRICS.items():
        value = getattr(report, field)
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    answer = {k: v for k, v in asdict(report).items() if k not in ("rearmed_for", "events")}
    answer["rearmed_for"] = report.rearmed_for.isoformat() if report.rearmed_for else None
    log = logger.warning if report.outcome == "failed" else logger.info
    log("background run", extra=answer)
    return answer
