"""Background work on one session: extraction of long-term memories, then summarization. This module
is the run (when it goes, its lock, its outcome and the next run it arms); the calls the routes make
to ask for one are in ``triggers``, and the steps themselves are ``extraction.Extraction`` and
``summarization.Summarization``, which share the run's ``session_state.SessionState``.

The background function calls ``SessionWork.run`` when the session's one-shot schedule fires
(DESIGN section 4), when a client asked for extraction now (``POST .../extract``), and when an
append made the session outgrow ``summarize_after``. One run at a time per session (a lock
with a lifetime of the function's timeout); a run that finds the lock taken arms the schedule
again a little later instead of waiting.

Session state (fields of the session's meta hash, ``database.keys.SessionKeys.meta``):

- ``read_seq``: the extraction cursor, the last message extraction has read. It only moves,
  in one compare-and-set script, after the memories of the messages up to it are kept.
- ``pending``: the memories the model returned for messages ``from..to`` that are not all kept
  yet. A run that fails after the model answered and is run again keeps these (under the same
  ids, derived from the store, session and range) instead of asking again, so extracting the
  same messages twice can never keep a memory twice.
- ``folded_seq``: the last message folded into ``summary``; messages up to it are gone from
  the session's message list in the same script that writes the summary, and it never passes
  ``read_seq`` (no message is summarized before extraction read it).
- ``armed_due``: the due time of the armed extraction schedule, set by the append that begins
  a quiet period (at most one schedule per quiet period), cleared by the run it triggers, or
  moved by a run that fired before the session was quiet (it re-arms for the quiet time).
- ``fold_requested``, ``requested_at``: summarization and a client's extraction were asked for.
- ``failures``, ``last_error``, ``last_run_at``: the outcome of runs; a failed run keeps the
  cursor, records its error and arms a retry with exponential backoff, until
  ``EXTRACTION_MAX_FAILURES`` failures in a row show the session as ``failed``.

Store-level (the store's slot): ``last_extraction_at`` / ``last_extraction_error`` and the set
of sessions with unread messages (``counts.waiting_for_extraction``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from agent_memory.background.extraction import Extraction
from agent_memory.background.runs import OutOfTime, RunBudget, RunReport
from agent_memory.background.scheduler import ExtractionTarget, Scheduler
from agent_memory.background.session_state import SessionState
from agent_memory.background.summarization import Summarization
from agent_memory.clock import to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys
from agent_memory.database.scripts import load_script
from agent_memory.errors import AgentMemoryError, DatabaseUnavailable
from agent_memory.memories.service import Memories
from agent_memory.observability import logger
from agent_memory.providers.language_models import LanguageModel
from agent_memory.sessions import scripts
from agent_memory.sessions.records import (
    EXTRACTION_MAX_FAILURES,
    ExtractionFields,
    SessionFields,
    SessionMeta,
)
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.registry import current_entry

LOCK_SECONDS = 300
"""A run's hold on its session; the background function's timeout (template.yaml)."""
BUSY_RETRY_SECONDS = 30
"""A run that finds another one working on the session tries again this much later."""
RETRY_BASE_SECONDS = 60
RETRY_CAP_SECONDS = 3600
"""Failed runs are retried after 60 s, 120 s, 240 s... at most an hour."""
FIRE_TOLERANCE = timedelta(seconds=5)
PERSIST_FIRST_WAIT_SECONDS = 0.05
PERSIST_LONGEST_WAIT_SECONDS = 1.0
"""A run that cannot reach the database to record its outcome or release its lock tries again
after 0.05 s, 0.1 s... then every second, until the function's time is up (``_persist``)."""


class SessionWork:
    """Extraction and summarization of one session of one store.

    ``model`` is the store's language model (None for ``llm_provider`` none: the run then does
    nothing). ``memories`` keeps what is extracted (redaction, embedding and deduplication are
    its job). ``scheduler`` arms the session's next run. Errors inside a run are caught and
    recorded (the run reports ``failed``). A run cut by a database stall records its failure
    and releases its lock once the database answers again, trying until the function's time
    is up, so that the session never reads ``running`` with nothing running and no
    ``last_error`` once the database is back; a stall longer than that leaves the lock to
    expire (``LOCK_SECONDS``) and the failure unrecorded, and the report says so.

    Its collaborators: the session's ``SessionState`` (shared by the steps), and, for each run,
    an ``Extraction`` and a ``Summarization`` with the run's ``RunBudget``.
    """

    def __init__(
        self,
        db: StoreDatabase,
        memories: Memories,
        model: LanguageModel | None,
        scheduler: Scheduler,
        target: ExtractionTarget,
    ) -> None:
        client, store, clock = db.client, db.config, db.clock
        self._redis = client
        self._store = store
        self._memories = memories
        self._model = model
        self._scheduler = scheduler
        self._target = target
        self._state = SessionState(client, store.keys(), target.session_id, clock)
        self._unlock = load_script(client, scripts.UNLOCK)

    # --- the run -----------------------------------------------------------------------------

    def run(self, budget: RunBudget | None = None) -> RunReport:
        """One background run: re-arm if the session is not quiet yet (and nothing else is
        asked), else extract every unread message and fold what outgrew ``summarize_after``,
        starting no model call after ``budget`` (default ``RunBudget.from_remaining(None)``)."""
        report = RunReport(self._target.session_id)
        meta = self._state.meta()
        if meta is None:
            report.outcome = "gone"
            return report
        self._state.life = meta.life
        budget = budget or RunBudget.from_remaining(None)
        if self._model is None:
            self._state.hdel(
                SessionFields.armed_due, SessionFields.fold_requested, SessionFields.requested_at
            )
            report.outcome = "no_model"
            return report
        with self._locked(budget.ends_at) as held:
            if not held:
                self._arm(self._state.now() + timedelta(seconds=BUSY_RETRY_SECONDS), report)
                report.outcome = "busy"
                return report
            extraction = Extraction(self._state, self._store, self._memories, self._model, budget)
            summarization = Summarization(self._state, self._store, self._model, extraction, budget)
            try:
                self._run(meta, report, extraction, summarization)
            except OutOfTime:
                # Stop between steps, all kept so far: the next run carries on from the cursor.
                self._arm(self._state.now() + timedelta(seconds=1), report)
                report.outcome = "continued"
            except AgentMemoryError as exc:
                self._record_failure(report, exc.message, budget.ends_at)
            except Exception as exc:  # noqa: BLE001 - recorded and logged, never silent
                logger.exception("background run stopped on an unexpected error")
                message = f"The run stopped on an internal error ({type(exc).__name__})."
                self._record_failure(report, message, budget.ends_at)
        return report

    def _record_failure(self, report: RunReport, message: str, until: float) -> None:
        """``_failed``, tried again while the database cannot be reached (``_persist``)."""
        if not _persist(lambda: self._failed(report, message), until):
            report.outcome = "failed"
            report.error = f"{message} (not recorded: the database could not be reached)"
            logger.warning("a failed background run could not record its failure")

    def _run(
        self,
        meta: SessionMeta,
        report: RunReport,
        extraction: Extraction,
        summarization: Summarization,
    ) -> None:
        now = self._state.now()
        quiet_at = meta.last_event_at + timedelta(seconds=self._store.extraction_delay_seconds)
        quiet = now >= quiet_at
        fold_needed = meta.message_count - meta.folded_seq > self._store.summarize_after
        # A schedule may fire a moment before its due time by this clock: a small tolerance.
        fired = meta.armed_due is not None and meta.armed_due <= now + FIRE_TOLERANCE
        if not (quiet or meta.requested or fold_needed):
            if meta.armed_due is not None and not fired:
                report.outcome = "early"  # the armed schedule will come
                return
            # Fired before the session was quiet (messages came since it was armed).
            self._arm(quiet_at, report)
            report.rearmed_for = quiet_at
            report.outcome = "rearmed"
            return
        if fired and quiet:
            self._state.hdel(SessionFields.armed_due)
        elif fired:
            # Still talking: this run, asked for by a summary or a client, reads what is unread
            # now, and the schedule comes back once the session is quiet.
            self._arm(quiet_at, report)
            report.rearmed_for = quiet_at
        if meta.requested:
            self._state.hdel(SessionFields.requested_at)
        extraction.extract(meta.message_count, report)
        report.extraction_runs = int(report.read_messages > 0)
        if fold_needed:
            summarization.summarize(report)
            report.summarization_runs = int(report.folded_messages > 0)
        self._state.hdel(SessionFields.fold_requested)
        self._succeeded(report)
        self._cover_late_messages(report)

    def _cover_late_messages(self, report: RunReport) -> None:
        """Messages appended while this run worked, after it read the session but before it
        cleared ``armed_due``, armed nothing (a schedule was still armed then): arm one now."""
        meta = self._state.meta()
        if meta is None or meta.unread <= 0 or meta.armed_due is not None:
            return
        quiet_at = meta.last_event_at + timedelta(seconds=self._store.extraction_delay_seconds)
        self._arm(max(quiet_at, self._state.now()), report)

    # --- outcomes and state ------------------------------------------------------------------

    def _store_still_here(self) -> bool:
        """Whether the store this run works for still exists (not deleted, not re-created):
        store-level records of a deleted store would stay forever."""
        with database_errors():
            raw = self._redis.hget(StoreKeys.registry, self._store.name)
        return current_entry(raw, self._store) is not None

    def _succeeded(self, report: RunReport) -> None:
        now_ms = to_ms(self._state.now())
        self._state.set_field(
            SessionFields.last_run_at,
            str(now_ms),
            SessionFields.failures,
            "0",
            SessionFields.last_error,
            "",
        )
        if not self._store_still_here():
            return
        with database_errors():
            # One key, two commands in order on one connection; not MULTI, whose redirects a cluster
            # client does not follow (database.client.TRANSACTION_REDIRECTS). Both may be sent again
            # after a timeout: they set and clear.
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(
                self._state.store_keys.extraction, ExtractionFields.last_extraction_at, now_ms
            )
            pipe.hdel(self._state.store_keys.extraction, ExtractionFields.last_extraction_error)
            pipe.execute()

    def _failed(self, report: RunReport, message: str) -> None:
        """Keep the cursor, record the error, and arm a retry with backoff (until the session
        has failed ``EXTRACTION_MAX_FAILURES`` times in a row)."""
        report.outcome = "failed"
        report.error = message
        now = self._state.now()
        with database_errors():
            failures = int(self._redis.hget(self._state.keys.meta, SessionFields.failures) or 0) + 1
        self._state.set_field(
            SessionFields.last_run_at,
            str(to_ms(now)),
            SessionFields.failures,
            str(failures),
            SessionFields.last_error,
            message,
        )
        self._state.hdel(SessionFields.fold_requested)
        if self._store_still_here():
            with database_errors():
                self._redis.hset(
                    self._state.store_keys.extraction,
                    mapping={
                        ExtractionFields.last_extraction_error: message,
                        ExtractionFields.last_extraction_error_at: to_ms(now),
                    },
                )
        if failures < EXTRACTION_MAX_FAILURES:
            wait = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** (failures - 1))
            try:
                self._arm(now + timedelta(seconds=wait), report)
            except AgentMemoryError as exc:  # cannot even schedule: the next append will
                report.error = f"{message} (and the retry could not be scheduled: {exc.message})"
        else:
            self._state.hdel(SessionFields.armed_due)

    def _arm(self, due: datetime, report: RunReport) -> None:
        """Arm the session's schedule for ``due`` (replacing any armed one)."""
        if not self._state.set_field(SessionFields.armed_due, str(to_ms(due))):
            return
        report.schedule_calls += 1
        try:
            self._scheduler.arm(self._target, due)
        except Exception:
            self._state.hdel(
                SessionFields.armed_due
            )  # not armed after all: the next append arms again
            raise

    @contextmanager
    def _locked(self, until: float) -> Iterator[bool]:
        """Hold the session's lock for the run (``True``), or say another run holds it. The
        lock is released at the end, tried again while the database cannot be reached until
        ``until`` (``time.monotonic``; ``_persist``); if it never answers, the lock expires."""
        token = secrets.token_hex(8)
        with database_errors():
            held = bool(self._redis.set(self._state.keys.lock, token, nx=True, ex=LOCK_SECONDS))
        try:
            yield held
        finally:
            if held and not _persist(
                lambda: self._unlock(keys=[self._state.keys.lock], args=[token]), until
            ):
                logger.warning("a background run could not release its session's lock")


def _persist(step: Callable[[], object], until: float) -> bool:
    """Run ``step`` (a write of the run's outcome), again after a wait while it raises
    ``DatabaseUnavailable``, until ``until`` (``time.monotonic``); whether it was done.
    The waits grow from ``PERSIST_FIRST_WAIT_SECONDS`` to ``PERSIST_LONGEST_WAIT_SECONDS``."""
    wait = PERSIST_FIRST_WAIT_SECONDS
    while True:
        try:
            with database_errors():
                step()
            return True
        except DatabaseUnavailable:
            if time.monotonic() + wait > until:
                return False
            time.sleep(wait)
            wait = min(wait * 2, PERSIST_LONGEST_WAIT_SECONDS)
