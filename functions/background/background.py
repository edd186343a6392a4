"""The background function: extraction and summarization of one session.

Invoked with ``{"kind": "extraction", "instance_id", "store", "session_id"}`` by the session's
one-shot EventBridge Scheduler schedule, by ``POST .../extract`` (an asynchronous invoke) and by
an append that made the session outgrow ``summarize_after`` (locally, by the local scheduler,
with the same event). A run that fails on a provider records the error on the session and the
store and arms its own retry; one that cannot reach the database raises, so that Lambda's
asynchronous retries (and the scheduler's retry policy) try again.
"""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory.background.runs import RunBudget
from agent_memory.background.scheduler import ExtractionTarget
from agent_memory.edge.runtime import current_runtime
from agent_memory.observability import logger, metrics

_COUNTS = {
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
}


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        try:
            target = ExtractionTarget.from_event(event)
        except ValueError as exc:
            logger.error("not a background event", extra={"problem": str(exc)})
            return {"outcome": "invalid"}
        logger.append_keys(store=target.store, session_id=target.session_id)
        handle = current_runtime().store_of(target)
        if handle is None:
            logger.info("the instance or store is gone; nothing to do")
            return {"outcome": "gone"}
        report = handle.run_background(
            target, RunBudget.from_remaining(context.get_remaining_time_in_millis())
        )
        metrics.add_metric(name="BackgroundRuns", unit=MetricUnit.Count, value=1)
        if report.outcome == "failed":
            metrics.add_metric(name="BackgroundFailures", unit=MetricUnit.Count, value=1)
        for field, name in _COUNTS.items():
            value = getattr(report, field)
            if value:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        # Counts and our own error text (no secrets); never the memories kept (``events``).
        answer = {k: v for k, v in asdict(report).items() if k not in ("rearmed_for", "events")}
        answer["rearmed_for"] = report.rearmed_for.isoformat() if report.rearmed_for else None
        log = logger.warning if report.outcome == "failed" else logger.info
        log("background run", extra=answer)
        return answer
    finally:
        if is_metrics_disabled():
            metrics.clear_metrics()
