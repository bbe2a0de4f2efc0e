"""Operators: named, scheduled runs of an operative agent that keep state between ticks.

An operator is a definition (which agent, which prompt, tools, agent options, and when it
ticks) plus what it keeps in the operator store: its state (``operator:<id>:state``), the
memory its agent stored, its schedule's progress. Its ticks' prompts and answers live in
the session store under :func:`session_id_of`. Every key an operator owns starts with
``operator:<id>:``, so removing an operator removes exactly what it owned.

Definitions are stored as one canonical JSON record (:func:`operator_to_record`), the same
in every backend. Each has an *incarnation* (:mod:`jarvis.domain.owners`): a tick writes its
state, notes and history only while the definition it started with is stored, so an
operator removed mid-tick and added again under the same name starts afresh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.owners import Owner
from jarvis.domain.ports import EmbeddingPort, MemoryPort, OperatorStorePort, SessionStorePort

_OPERATOR_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_STATE_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")

MAX_STATE_BYTES = 1024 * 1024
"""The largest JSON value one state key holds (an operator's notes are far smaller)."""

MAX_DEFINITION_BYTES = 256 * 1024
"""The largest stored operator definition."""

DEFINITION_PREFIX = "operator-def:"
"""Where definitions live in the operator store: ``operator-def:<id>``."""

OPERATIVE_AGENTS: tuple[str, ...] = ("operative", "monitor_operative")
"""The agents an operator can run."""


def check_operator_id(operator_id: str) -> str:
    """``operator_id`` when valid (letters, digits, ``_ -``, at most 64 characters), else
    ``ConfigurationError``: ids become store keys and session ids."""
    if not isinstance(operator_id, str) or not _OPERATOR_ID.fullmatch(operator_id):
        raise ConfigurationError(
            f"Invalid operator name {shown(str(operator_id))!r}.",
            hint="Use letters, digits, _ and - (at most 64 characters), e.g. news-digest.",
        )
    return operator_id


def check_state_key(key: str) -> str:
    """``key`` when it is a valid operator-store key (1-200 visible ASCII characters)."""
    if not isinstance(key, str) or not _STATE_KEY.fullmatch(key):
        raise ConfigurationError(
            f"Invalid operator store key {shown(str(key))!r}.",
            hint="Keys are 1 to 200 visible ASCII characters, no spaces.",
        )
    return key


def encode_state(value: JSONValue) -> str:
    """``value`` as the compact JSON text stores keep; refuses one over the size bound or
    holding a number that is not finite."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigurationError(f"An operator state value must be JSON ({exc}).") from exc
    if len(text) > MAX_STATE_BYTES // 4 and len(text.encode("utf-8")) > MAX_STATE_BYTES:
        raise ConfigurationError(
            f"An operator state value of {len(text.encode('utf-8'))} bytes is too large "
            f"(at most {MAX_STATE_BYTES})."
        )
    return text


def decode_state(text: str | bytes) -> JSONValue:
    """Parse what :func:`encode_state` wrote; ``ValueError`` when it is not JSON."""
    try:
        value: JSONValue = json.loads(text)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    return value


def session_id_of(operator_id: str) -> str:
    """The session that holds operator ``operator_id``'s ticks."""
    return f"operator:{check_operator_id(operator_id)}"


def key_prefix(operator_id: str) -> str:
    """The prefix of every operator-store key operator ``operator_id`` owns."""
    return f"operator:{check_operator_id(operator_id)}:"


def state_key(operator_id: str) -> str:
    """Where the operator's state lives: ``operator:<id>:state``."""
    return key_prefix(operator_id) + "state"


def tick_lease(operator_id: str, tick_us: int) -> str:
    """The lease that claims one tick: its name orders ticks of an operator by time."""
    return f"tick:{check_operator_id(operator_id)}:{tick_us:020d}"


def run_lease(operator_id: str) -> str:
    """The lease held while one of the operator's ticks runs (ticks never overlap)."""
    return f"operator-run:{check_operator_id(operator_id)}"


# --- definitions --------------------------------------------------------------------------

ScheduleKind = Literal["every", "cron", "manual"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """When an operator ticks: every ``seconds``, on a cron ``expression`` (in ``timezone``),
    or only when asked (``manual``)."""

    kind: ScheduleKind = "manual"
    seconds: int = 0
    expression: str = ""
    timezone: str = "UTC"

    def describe(self) -> str:
        if self.kind == "every":
            return f"every {format_seconds(self.seconds)}"
        if self.kind == "cron":
            zone = "" if self.timezone == "UTC" else f" ({self.timezone})"
            return f'cron "{self.expression}"{zone}'
        return "manual"


def format_seconds(seconds: int) -> str:
    """``5400`` → ``1h30m``: how ``--every`` writes an interval."""
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Operator:
    """One operator's definition. ``created_us`` anchors its interval schedule."""

    id: str
    agent: str = "operative"
    prompt: str = ""
    schedule: Schedule = field(default_factory=Schedule)
    tools: tuple[str, ...] = ()
    agent_options: JSONObject = field(default_factory=dict)
    model: str | None = None
    created_us: int = 0
    system_prompt: str | None = None
    """The operator's own system prompt (``operators add --system``); ``None``: the
    operative protocol's template."""
    incarnation: str = ""
    """Given when it is added (``""``: stored before definitions had one)."""

    @property
    def session_id(self) -> str:
        return session_id_of(self.id)


def owner_of(operator: Operator) -> Owner:
    """What a tick of ``operator`` writes for: this very definition."""
    return Owner(DEFINITION_PREFIX + operator.id, operator.incarnation, f"operator {operator.id!r}")


def operator_to_record(operator: Operator) -> str:
    """The canonical JSON text every store keeps for ``operator``."""
    check_operator_id(operator.id)
    data: JSONObject = {
        "id": operator.id,
        "agent": operator.agent,
        "prompt": operator.prompt,
        "schedule": {
            "kind": operator.schedule.kind,
            "seconds": operator.schedule.seconds,
            "expression": operator.schedule.expression,
            "timezone": operator.schedule.timezone,
        },
        "tools": list(operator.tools),
        "agent_options": operator.agent_options,
        "model": operator.model,
        "created_us": operator.created_us,
    }
    if operator.system_prompt is not None:
        data["system_prompt"] = operator.system_prompt
    if operator.incarnation:
        data["incarnation"] = operator.incarnation
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(text.encode("utf-8")) > MAX_DEFINITION_BYTES:
        raise ConfigurationError(
            f"The operator definition is larger than {MAX_DEFINITION_BYTES} bytes.",
            hint="Shorten its prompt.",
        )
    return text


def operator_from_record(value: JSONValue) -> Operator:
    """Rebuild what :func:`operator_to_record` wrote; ``ValueError`` when it is not one."""
    try:
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, dict):
            raise TypeError("a definition is a JSON object")
        schedule = value.get("schedule") or {}
        tools = value.get("tools") or []
        options = value.get("agent_options") or {}
        model = value.get("model")
        system = value.get("system_prompt")
        if system is not None and not isinstance(system, str):
            raise TypeError("system_prompt is a string")
        incarnation = value.get("incarnation", "")
        if not isinstance(incarnation, str):
            raise TypeError("incarnation is a string")
        if not isinstance(schedule, dict) or not isinstance(options, dict):
            raise TypeError("schedule and agent_options are objects")
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise TypeError("tools is a list of names")
        if model is not None and not isinstance(model, str):
            raise TypeError("model is a string")
        kinds: tuple[ScheduleKind, ...] = ("every", "cron", "manual")
        kind = next((k for k in kinds if k == schedule.get("kind", "manual")), None)
        if kind is None:
            raise ValueError(f"unknown schedule kind {schedule.get('kind')!r}")
        seconds, created = schedule.get("seconds", 0), value.get("created_us", 0)
        if not isinstance(seconds, int) or not isinstance(created, int):
            raise TypeError("seconds and created_us are integers")
        return Operator(
            id=check_operator_id(str(value["id"])),
            agent=str(value.get("agent", "operative")),
            prompt=str(value.get("prompt", "")),
            schedule=Schedule(
                kind=kind,
                seconds=seconds,
                expression=str(schedule.get("expression", "")),
                timezone=str(schedule.get("timezone", "UTC")),
            ),
            tools=tuple(str(t) for t in tools),
            agent_options=options,
            model=model,
            created_us=created,
            system_prompt=system,
            incarnation=incarnation,
        )
    except (KeyError, TypeError, ValueError, RecursionError, ConfigurationError) as exc:
        raise ValueError(f"not an operator definition: {exc}") from exc


# --- what every operator store checks ----------------------------------------------------

COMPLETED_US = (1 << 63) - 1
"""The expiry stores give a completed tick's claim: never."""


def check_prefix(prefix: str) -> str:
    """A key prefix for listing or deleting: a valid key of at least 3 characters."""
    if not isinstance(prefix, str) or len(prefix) < 3:
        raise ConfigurationError(f"A key prefix has at least 3 characters, not {prefix!r}.")
    return check_state_key(prefix)


def key_after(prefix: str) -> str:
    """The first key past every key that starts with ``prefix`` (keys are ASCII)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def lease_ttl_us(ttl_seconds: float) -> int:
    """A lease ttl in whole microseconds; refuses what is not from 0 to 366 days."""
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int | float)
        or not 0 < ttl_seconds <= 86_400 * 366
    ):
        raise ConfigurationError(f"A lease ttl is 0 to 366 days, not {ttl_seconds!r}.")
    return max(1, round(ttl_seconds * 1_000_000))


# --- what an operative agent runs on -----------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorBinding:
    """What one tick of an operator runs on besides the engine: the operator's id, the
    session store that keeps its ticks, the operator store that keeps its state, and for
    ``monitor_operative``'s retrieval a keyword index factory (a fresh, empty
    :class:`~jarvis.domain.ports.MemoryPort` per tick) and a sentence-embedding model.
    ``tick_label`` names the tick in the operator's prompt (its scheduled time)."""

    operator_id: str
    sessions: SessionStorePort
    store: OperatorStorePort
    keyword_index: Callable[[], MemoryPort] | None = None
    embeddings: EmbeddingPort | None = None
    tick_label: str = ""
