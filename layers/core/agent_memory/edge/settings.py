"""The settings of every function, read from the environment (``KIVIDB_*``) when an invocation
starts: the only place of the layer that reads ``os.environ`` for its configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, LAMBDA_PAYLOAD_LIMIT, MIN_ANSWER_BYTES

if TYPE_CHECKING:
    from agent_memory.background.scheduler import SchedulerSettings

DEFAULT_MAX_BODY_BYTES = 1_048_576

FLAG_ON = ("1", "true", "yes", "on")
FLAG_OFF = ("0", "false", "no", "off", "")
"""The spellings of a boolean setting (``KIVIDB_ALLOW_PRIVATE_ENDPOINTS``, ``KIVIDB_ACCESS_LOG``),
any case, spaces around ignored; empty is off, as unset is. ``parse_flag`` is their one parser:
the functions, the local stack's banner and its server all read them with it, so they cannot
disagree (issue 32: ``y`` allowed private endpoints while the banner said they were refused,
and an empty value failed every request)."""


def parse_flag(name: str, value: str | None) -> bool:
    """The boolean setting ``name`` given as ``value`` (None: unset, so off): ``FLAG_ON`` or
    ``FLAG_OFF``; ``ValueError`` naming the setting and the spellings for anything else."""
    text = (value or "").strip().lower()
    if text in FLAG_ON:
        return True
    if text in FLAG_OFF:
        return False
    raise ValueError(
        f"{name} must be one of {', '.join(FLAG_ON)} (on) or {', '.join(f for f in FLAG_OFF if f)}"
        f" or empty (off), not {value!r}"
    )


class FunctionSettings(BaseModel):
    """Environment of every function (``KIVIDB_*``), set by ``template.yaml`` or the local stack.

    ``control_url``: the control database (organizations, keys, instances).
    ``kms_key_id``: the KMS key (ARN, id or alias) of envelope encryption of provider API keys;
    set in AWS (``template.yaml``), unset in the local stack.
    ``secret_key_file`` / ``secret_key``: the Fernet key of the local stack and the tests (a key
    file); next to ``kms_key_id`` it still reads keys stored before the switch to KMS.
    ``max_body_bytes``: larger request bodies are a 413 before they are parsed.
    ``instance_cache_seconds``: how long a warm container trusts an instance record it found
    (re-pointing an instance reaches every container within this time).
    ``index_cache_mb``: the bound of the warm container's in-memory search index (LRU by actor).
    ``allow_private_endpoints``: let custom model endpoints be plain http or private addresses
    (``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``); the template never sets it, and the local stack
    passes it on only when it is started with it (tests and the README's try-out do).
    ``scheduler``: ``aws`` (EventBridge Scheduler, with ``schedule_group``,
    ``background_function_arn`` and ``scheduler_role_arn``, which template.yaml sets) or
    ``local`` (the local stack's scheduler on the control database).
    ``answer_budget_bytes``: the most an answer's body may weigh as Lambda carries it
    (``answers.wire_bytes``; Lambda refuses a response over 6 MB): recall, a session, searches,
    listings and export pages cut what they hold to it and say so, and the resolver answers any
    answer over it by more than 1/64 with a 409 ``answer_too_large`` (``answers.over_budget``).
    ``search_threads``: threads of a large compact search (``search.quantize``); unset (or not
    a positive whole number, which is ignored): the CPUs the process may use, at most 4.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    control_url: str = Field(min_length=1)
    kms_key_id: str | None = None
    secret_key_file: Path | None = None
    secret_key: SecretStr | None = None
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    instance_cache_seconds: float = Field(30.0, ge=0, le=3600)
    index_cache_mb: int = Field(256, ge=1, le=10_240)
    allow_private_endpoints: bool = False
    scheduler: Literal["aws", "local"] = "aws"
    schedule_group: str | None = None
    background_function_arn: str | None = None
    scheduler_role_arn: str | None = None
    search_threads: int | None = None
    answer_budget_bytes: int = Field(
        DEFAULT_ANSWER_BUDGET, ge=MIN_ANSWER_BYTES, le=LAMBDA_PAYLOAD_LIMIT
    )

    @field_validator("allow_private_endpoints", mode="before")
    @classmethod
    def _flag(cls, value: object) -> object:
        # The one parser of boolean settings (parse_flag), not pydantic's own spellings.
        return (
            parse_flag("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", value) if isinstance(value, str) else value
        )

    @field_validator("search_threads", mode="before")
    @classmethod
    def _positive_or_unset(cls, value: object) -> int | None:
        # Any other value is ignored (docs/limits.md), rather than failing every invocation.
        if isinstance(value, str) and value.isdigit() and int(value) > 0:
            return int(value)
        return value if isinstance(value, int) and value > 0 else None

    def scheduler_settings(self) -> SchedulerSettings:
        """The settings of ``background.scheduler.make_scheduler``."""
        from agent_memory.background.scheduler import SchedulerSettings  # only who schedules

        return SchedulerSettings(
            kind=self.scheduler,
            control_url=self.control_url,
            schedule_group=self.schedule_group,
            background_function_arn=self.background_function_arn,
            scheduler_role_arn=self.scheduler_role_arn,
        )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> FunctionSettings:
        """Read ``KIVIDB_<FIELD>`` variables. (A plain read: pydantic-settings took about 2 ms
        per invocation, which is a third of the latency target for adding events.)"""
        return cls.model_validate(dict(cls.environ_values(environ)))

    @classmethod
    def environ_values(cls, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """The ``KIVIDB_<FIELD>`` variables that are set, as ``(field, value)`` pairs in field
        order: what ``from_environ`` validates, and a key to cache its result by."""
        prefix = "KIVIDB_"
        found = ((name, environ.get(prefix + name.upper())) for name in cls.model_fields)
        return tuple((name, value) for name, value in found if value is not None)
