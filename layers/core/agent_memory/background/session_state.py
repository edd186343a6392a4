"""A session as a background run sees it: its meta record, its messages in chunks, and its
fields, changed only while it is the session the run began with (its life).

``Extraction``, ``Summarization`` and ``SessionWork`` share one ``SessionState`` per run: the
run sets ``life`` when it reads the session first, and every change after that goes through
``sessions.scripts.IF_LIVE`` (or a script taking the life), so a session deleted, expired or started
again under the same id while the run works is never changed by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import redis

from agent_memory.background.prompts import message_line
from agent_memory.clock import Clock, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import SessionKeys, StoreKeys
from agent_memory.database.scripts import load_script
from agent_memory.sessions import scripts
from agent_memory.sessions.models import Message
from agent_memory.sessions.records import SessionMeta, SessionRecord, decode_member, live_meta

CHUNK_MESSAGES = 100
CHUNK_CHARS = 40_000
"""One model call reads at most this many messages / characters of message lines as the prompt
shows them (escapes included; at least one message, whose text ``render.quote`` cuts at
``MAX_QUOTED_CHARS``), so a 1,000-message session is extracted and summarized in bounded steps."""


class SessionState:
    """One session of one store during a background run. Errors: ``DatabaseUnavailable``."""

    def __init__(
        self, client: redis.Redis, store_keys: StoreKeys, session_id: str, clock: Clock
    ) -> None:
        self.client = client
        self.store_keys = store_keys
        self.session_id = session_id
        self.keys: SessionKeys = store_keys.session(session_id)
        self.clock = clock
        self.life = ""
        """The session's raw ``created_at`` when the run began ('' before it read it)."""
        self._if_live = load_script(client, scripts.IF_LIVE)

    def now(self) -> datetime:
        """The run's clock, now."""
        return self.clock.now()

    def meta(self) -> SessionMeta | None:
        """The live session's meta record (None when it is gone or expired)."""
        with database_errors():
            raw = self.client.hgetall(self.keys.meta)
        fields = {str(k): str(v) for k, v in raw.items()}
        return live_meta(self.session_id, fields, to_ms(self.now()))

    def record(self, *fields: str) -> SessionRecord:
        """The meta record's ``fields`` (``sessions.records.SessionFields``) read now, the others at
        their defaults."""
        with database_errors():
            values = self.client.hmget(self.keys.meta, list(fields))
        return SessionRecord.from_hash(
            {name: str(v) for name, v in zip(fields, values, strict=True) if v is not None}
        )

    def set_field(self, *pairs: str) -> bool:
        """Set field, value, ... while the session is the run's; False when it is not."""
        with database_errors():
            args = [self.life, "set", *pairs]
            return bool(self._if_live(keys=[self.keys.meta], args=args))

    def hdel(self, *fields: str) -> None:
        """Delete ``fields`` while the session is the run's."""
        with database_errors():
            self._if_live(keys=[self.keys.meta], args=[self.life, "del", *fields])

    def chunk(self, after: int, upto: int) -> list[Message]:
        """The messages after ``after`` up to ``upto`` that one model call reads (at most
        ``CHUNK_MESSAGES``, and ``CHUNK_CHARS`` of message lines as the prompt shows them, with
        their escapes: at least one, which ``render.quote`` bounds); empty when none."""
        with database_errors():
            members = self.client.zrangebyscore(
                self.keys.messages, f"({after}", upto, start=0, num=CHUNK_MESSAGES
            )
        messages: Sequence[Message] = [decode_member(str(m)) for m in members]
        picked: list[Message] = []
        chars = 0
        for message in messages:
            chars += len(message_line(message)) + 1
            if picked and chars > CHUNK_CHARS:
                break
            picked.append(message)
        return picked
