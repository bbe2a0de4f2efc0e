"""Managed agents: named, persisted agent definitions that a server runs on request.

A definition says which agent of the registry answers (``agent``), on which model, with
which system prompt, tools, persona, sampling and turn budget. Its conversation lives in the
session store under :func:`session_id_of`, so any process that shares the store (one
PostgreSQL for several servers) continues the same conversation.

Definitions are stored as one canonical JSON record (:func:`agent_to_record`), the same in
every backend, so they move between stores unchanged. Each has an *incarnation*
(:mod:`jarvis.domain.owners`): a run writes to the conversation only while the definition
it started with is stored, so a definition deleted mid-run and created again under the
same id never receives the old run's answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.owners import Owner

_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

DEFINITION_PREFIX = "managed_agent:"
"""Where a definition lives in the operator store of the session database:
``managed_agent:<id>``."""

MAX_DEFINITION_BYTES = 256 * 1024
"""The largest stored definition (a system prompt of a few pages is far smaller)."""


def check_agent_id(agent_id: str) -> str:
    """``agent_id`` when it is a valid managed-agent id (letters, digits, ``_ -``, at most 64
    characters, nothing after: not even a newline), else ``ConfigurationError``: ids become
    store keys and session ids. The refused id is cut at 80 characters in the message: it
    comes from a URL, and a message echoing 30,000 characters helps nobody."""
    if not _AGENT_ID.fullmatch(agent_id):
        raise ConfigurationError(
            f"Invalid managed agent id {shown(agent_id)!r}.",
            hint="Use letters, digits, _ and - (at most 64 characters).",
        )
    return agent_id


def session_id_of(agent_id: str) -> str:
    """The session that holds managed agent ``agent_id``'s conversation."""
    return f"managed-agent:{check_agent_id(agent_id)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedAgentFields:
    """The fields of a definition a client sets: written once for the stored definition
    (:class:`ManagedAgent`) and for what a client sends (the application's spec)."""

    name: str = ""
    agent: str = "simple"
    """The registry key (or alias) of the agent that answers."""
    model: str | None = None
    system_prompt: str | None = None
    """Replaces the agent's own prompt (never its protocol instructions)."""
    tools: tuple[str, ...] = ()
    persona: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    agent_options: JSONObject = field(default_factory=dict)
    """Further settings of the agent, as ``-O KEY=VALUE`` on the command line."""
    memory: bool | None = None
    """Whether each run receives its question's best chunks of the knowledge base
    (``jarvis ask --memory``); ``None``: the server's ``[agent] context_from_memory``. A
    definition stored before this field existed reads as ``None``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedAgent(ManagedAgentFields):
    """One managed agent's definition. ``None`` fields fall back to the server's
    configuration, as ``jarvis ask`` does without the matching option."""

    id: str
    created_us: int = 0
    updated_us: int = 0
    incarnation: str = ""
    """Given at creation, kept by updates (``""``: stored before definitions had one)."""


def owner_of(agent: ManagedAgent) -> Owner:
    """What a run of ``agent`` writes for: this very definition."""
    return definition_owner(agent.id, agent.incarnation)


def definition_owner(agent_id: str, incarnation: str) -> Owner:
    """The definition of ``agent_id`` with ``incarnation`` (a deletion names the one it
    read this way), as :func:`owner_of` names it."""
    return Owner(DEFINITION_PREFIX + agent_id, incarnation, f"managed agent {agent_id!r}")


def agent_to_record(agent: ManagedAgent) -> str:
    """The canonical JSON text every store keeps for ``agent``; refuses an oversized one."""
    data: JSONObject = {
        "id": agent.id,
        "name": agent.name,
        "agent": agent.agent,
        "model": agent.model,
        "system_prompt": agent.system_prompt,
        "tools": list(agent.tools),
        "persona": agent.persona,
        "temperature": agent.temperature,
        "max_tokens": agent.max_tokens,
        "max_turns": agent.max_turns,
        "agent_options": agent.agent_options,
        "memory": agent.memory,
        "incarnation": agent.incarnation,
        "created_us": agent.created_us,  # last (with updated_us): PostgreSQL sorts by it
        "updated_us": agent.updated_us,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_DEFINITION_BYTES:
        raise ConfigurationError(
            f"The managed agent definition is larger than {MAX_DEFINITION_BYTES} bytes.",
            hint="Shorten its system prompt.",
        )
    return text


def _opt_str(value: JSONValue) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError("expected a string or null")


def _opt_int(value: JSONValue) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError("expected an integer or null")


def _opt_float(value: JSONValue) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError("expected a number or null")


def _opt_bool(value: JSONValue) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise TypeError("expected true, false or null")


def agent_from_record(text: str | bytes) -> ManagedAgent:
    """Parse what :func:`agent_to_record` wrote; ``ValueError`` when it is not one."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("a definition is a JSON object")
        tools = data.get("tools") or []
        options = data.get("agent_options") or {}
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise TypeError("tools is a list of names")
        if not isinstance(options, dict):
            raise TypeError("agent_options is an object")
        return ManagedAgent(
            id=check_agent_id(str(data["id"])),
            name=str(data.get("name") or ""),
            agent=str(data["agent"]),
            model=_opt_str(data.get("model")),
            system_prompt=_opt_str(data.get("system_prompt")),
            tools=tuple(tools),
            persona=_opt_str(data.get("persona")),
            temperature=_opt_float(data.get("temperature")),
            max_tokens=_opt_int(data.get("max_tokens")),
            max_turns=_opt_int(data.get("max_turns")),
            agent_options=options,
            memory=_opt_bool(data.get("memory")),
            created_us=_opt_int(data.get("created_us")) or 0,
            updated_us=_opt_int(data.get("updated_us")) or 0,
            incarnation=_opt_str(data.get("incarnation")) or "",
        )
    except (KeyError, TypeError, ValueError, RecursionError, ConfigurationError) as exc:
        raise ValueError(f"not a managed agent definition: {exc}") from exc


Position = tuple[int, str]
"""A place in the oldest-first order of definitions: ``(created_us, id)`` of the last one
seen; a page lists the definitions after it."""


def position_of(agent: ManagedAgent) -> Position:
    return (agent.created_us, agent.id)


class ManagedAgentStorePort(Protocol):
    """Where managed agent definitions persist (the session store's database).

    Every method raises :class:`~jarvis.domain.sessions.records.SessionStoreError` (never a driver
    exception) when the store fails, as the session store does; an invalid id is a
    ``ConfigurationError``. Writers are last-writer-wins per definition, except
    :meth:`create`, which never replaces one, and :meth:`update` and :meth:`delete`, which
    change only the definition they read.
    """

    async def put(self, agent: ManagedAgent) -> None:
        """Create the definition, or replace the one with the same id."""
        ...

    async def create(self, agent: ManagedAgent) -> bool:
        """Store the definition only while none with its id is stored, in one atomic step
        (checked and written in one statement the database serialises); ``False``, and
        nothing written, when there is one. Two processes or servers creating one id at
        once: exactly one wins, and the other is told so, instead of replacing the
        winner's definition (and incarnation) as a read-then-:meth:`put` would."""
        ...

    async def update(self, agent: ManagedAgent) -> bool:
        """Replace the stored definition of ``agent.id`` only while it is the one ``agent``
        was read from (the same incarnation, checked in the write's transaction); ``False``,
        and nothing written, when it was deleted meanwhile, even if created again since.
        Never creates one: a change read before a deletion must not bring the agent back."""
        ...

    async def get(self, agent_id: str) -> ManagedAgent | None:
        """The definition, or ``None`` when there is none with that id."""
        ...

    async def list(
        self, *, after: Position | None = None, limit: int | None = None
    ) -> list[ManagedAgent]:
        """The definitions oldest first (by creation time, then id): those after ``after``
        only when given, at most ``limit`` of them when given (the store reads no more)."""
        ...

    async def count(self) -> int:
        """How many definitions there are."""
        ...

    async def delete(self, agent_id: str, incarnation: str) -> bool:
        """Forget the definition of ``agent_id`` only while it is the one read (stored with
        ``incarnation``, checked in the delete's transaction); ``False``, and nothing
        deleted, when there is none or it was deleted meanwhile, even if created again
        since: a deletion read before another client's delete-and-create must not remove
        the definition created since."""
        ...
