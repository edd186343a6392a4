"""Summarization: the oldest messages of a session are folded into its running summary.

Once a session holds more than ``summarize_after`` verbatim messages, the oldest ones (all but
``keep_recent``) are folded, in chunks, each one model call given the summary so far
(``background.prompts.summary_prompt``, answer ``background.prompts.SummaryAnswer``); each chunk's
summary replaces the old one and its messages leave the session in one script
(``sessions.scripts.FOLD``), never past the extraction cursor: extraction reads them first.
"""

from __future__ import annotations

from agent_memory.background.extraction import Extraction
from agent_memory.background.prompts import SummaryAnswer, summary_prompt
from agent_memory.background.runs import RunBudget, RunReport
from agent_memory.background.session_state import SessionState
from agent_memory.database.client import database_errors
from agent_memory.database.scripts import load_script
from agent_memory.providers.language_models import LanguageModel
from agent_memory.sessions import scripts
from agent_memory.sessions.records import SessionFields
from agent_memory.stores.models import StoreConfig

MAX_SUMMARY_CHARS = 8_000
SUMMARY_MAX_TOKENS = 2_048


class Summarization:
    """The summarization step of a run on ``state``'s session, with the store's language
    ``model``, within ``budget``; ``extraction`` reads what is to be folded first. Errors:
    ``ModelAnswerInvalid``, provider and database errors."""

    def __init__(
        self,
        state: SessionState,
        store: StoreConfig,
        model: LanguageModel,
        extraction: Extraction,
        budget: RunBudget,
    ) -> None:
        self._state = state
        self._store = store
        self._model = model
        self._extraction = extraction
        self._budget = budget
        self._fold = load_script(state.client, scripts.FOLD)

    def summarize(self, report: RunReport) -> None:
        """Fold the oldest ``verbatim - keep_recent`` messages (as counted now) into the
        summary, in chunks of at most ``CHUNK_MESSAGES`` / ``CHUNK_CHARS``, each one model call
        given the summary so far. Messages appended meanwhile stay verbatim."""
        state = self._state
        record = state.record(SessionFields.seq, SessionFields.folded_seq)
        seq, folded = record.seq, record.folded_seq
        if seq - folded <= self._store.summarize_after:
            return
        target = seq - self._store.keep_recent
        self._extraction.extract(target, report)  # never fold what extraction has not read
        while folded < target:
            summary = state.record(SessionFields.summary).summary
            chunk = state.chunk(folded, target)
            if not chunk:
                return
            last = chunk[-1].seq
            self._budget.check()
            system, user = summary_prompt(chunk, summary)
            completion = self._model.complete_json(system, user, max_tokens=SUMMARY_MAX_TOKENS)
            report.count(completion)
            new_summary = SummaryAnswer.read(completion.data).summary
            with database_errors():
                done = self._fold(
                    keys=[state.keys.meta, state.keys.messages],
                    args=[folded, last, new_summary[:MAX_SUMMARY_CHARS], state.life],
                )
            if not int(done):
                return  # deleted, or another run folded meanwhile
            report.folded_messages += last - folded
            folded = last
