"""What the routes ask of background work: a run now (``POST .../extract``), and after an append
or an import, the session's extraction schedule armed and summarization asked for. Apart from
the run itself (``work``), so that the functions of working memory load the scheduler and the
session scripts only, not extraction, memories or numpy.
"""

from __future__ import annotations

from datetime import datetime

import redis

from agent_memory.background.scheduler import ExtractionTarget, Scheduler
from agent_memory.clock import Clock, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.scripts import load_script
from agent_memory.errors import AgentMemoryError
from agent_memory.observability import logger
from agent_memory.sessions import scripts
from agent_memory.sessions.records import SessionFields, live_meta
from agent_memory.sessions.service import Appended, Sessions
from agent_memory.stores.models import StoreConfig


def request_extraction(
    client: redis.Redis, store: StoreConfig, session_id: str, clock: Clock
) -> bool:
    """Mark the session's extraction as asked for now (``POST .../extract``), so the run does
    not wait for the quiet period; False when the session does not exist."""
    keys = store.keys().session(session_id)
    now = to_ms(clock.now())
    with database_errors():
        raw = client.hgetall(keys.meta)
        meta = live_meta(session_id, {str(k): str(v) for k, v in raw.items()}, now)
        if meta is None:
            return False
        script = load_script(client, scripts.IF_LIVE)
        return bool(
            script(keys=[keys.meta], args=[meta.life, "set", SessionFields.requested_at, str(now)])
        )


def schedule_background(
    scheduler: Scheduler, sessions: Sessions, target: ExtractionTarget, appended: Appended
) -> None:
    """After an append: arm the session's extraction schedule (the append reserved it) and ask
    for summarization now when the append called for it.

    A scheduler failure does not fail the append (its messages are kept, and a retried
    request would add them twice): the reservation is released so that the next append tries
    again, and the failure is logged on ``agent_memory.background``."""
    if appended.arm_due is not None:
        arm_reserved(scheduler, sessions, target, appended.arm_due)
    if appended.fold:
        try:
            scheduler.run_now(target)
        except AgentMemoryError as exc:
            sessions.release(target.session_id, SessionFields.fold_requested)
            logger.error("could not ask for summarization: %s", exc.message)


def arm_reserved(
    scheduler: Scheduler, sessions: Sessions, target: ExtractionTarget, due: datetime
) -> None:
    """Arm the session's extraction schedule for ``due``, which an append or an import
    reserved (``armed_due``); when the scheduler fails, release the reservation (the next
    append arms again) and log it, without failing the write that reserved it."""
    try:
        scheduler.arm(target, due)
    except AgentMemoryError as exc:
        sessions.release(target.session_id, SessionFields.armed_due, str(to_ms(due)))
        logger.error("could not arm the extraction schedule: %s", exc.message)
