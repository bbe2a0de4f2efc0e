"""What ``jarvis mcp serve`` offers an MCP client, independent of the SDK that speaks MCP.

Why a module of its own: the tools (their names, schemas and what they do) are jarvis's,
the wire is the ``mcp`` SDK's (:mod:`.sdk_server`). Every tool runs on the services of the
composition root (the :class:`~jarvis.entrypoints.composition.Runtime` and the server state
``jarvis serve`` uses), under the same :class:`~jarvis.entrypoints.http.run_policy.RunPolicy`:
an MCP client is driven by a model, like an HTTP client, so it may not move a run to
another engine or start an external runtime unless the operator allowed it.

* ``ask``: one question through an agent (optionally within a stored conversation); the
  answer as text, and as structured content the turns, usage and stop reason;
* ``sessions_list``, ``session_show``: the stored conversations;
* ``memory_manage``, ``user_profile_manage``: the persona's files (the same tools the
  agents have);
* ``agent_<id>``: each managed agent of the store, continuing its own conversation.

Every failure is a tool result marked as an error, with jarvis's own message (URL
credentials masked), never a crashed server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import message_to_record
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.well_formed import (
    holds_lone_surrogate,
    is_well_formed,
    well_formed,
    well_formed_object,
)

if TYPE_CHECKING:
    from jarvis.application.ask import Answer
    from jarvis.application.registry import AgentRegistry
    from jarvis.application.run_updates import AnswerUpdate
    from jarvis.domain.ports import ToolPort
    from jarvis.domain.run.updates import (
        ApprovalDecided,
        ApprovalRequired,
        TextDelta,
        ToolCallsRequested,
        ToolResultReady,
    )
    from jarvis.entrypoints.composition import Runtime
    from jarvis.entrypoints.http.state import ServerState

Progress = Callable[[str], Awaitable[None]]
"""Told one line for each step of a run (a text delta, a tool call, a tool result)."""

AGENT_TOOL_PREFIX = "agent_"
MAX_QUESTION_CHARS = 2_000_000
"""The longest question or message a tool takes (as ``jarvis serve``'s messages)."""
MAX_PROGRESS_CHARS = 1000
"""A progress message is cut here (a tool result may be long; the answer holds it all)."""
MAX_LISTED_SESSIONS = 1000
MAX_SHOWN_MESSAGES = 1000
PERSONA_TOOLS = ("memory_manage", "user_profile_manage")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOffer:
    """One tool as the client sees it."""

    name: str
    description: str
    input_schema: JSONObject
    read_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What a call returned: text for the model, structured content, and whether it failed."""

    text: str
    structured: JSONObject | None = None
    is_error: bool = False


def _failure(message: str) -> ToolOutcome:
    return ToolOutcome(text=message, is_error=True)


class UsageError(Exception):
    """The client's arguments cannot be used (answered as an error result)."""


class PolicyError(Exception):
    """The run needs an option or runtime the operator did not allow."""


def _string(arguments: Mapping[str, JSONValue], key: str, *, required: bool = False) -> str | None:
    value = arguments.get(key)
    if value is None:
        if required:
            raise UsageError(f"'{key}' is required.")
        return None
    if not isinstance(value, str):
        raise UsageError(f"'{key}' must be a string.")
    if required and not value.strip():
        raise UsageError(f"'{key}' is empty.")
    if len(value) > MAX_QUESTION_CHARS:
        raise UsageError(f"'{key}' is longer than {MAX_QUESTION_CHARS:,} characters.")
    return value


def _strings(arguments: Mapping[str, JSONValue], key: str) -> tuple[str, ...]:
    value = arguments.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"'{key}' must be a list of strings.")
    return tuple(str(v) for v in value)


def _object(arguments: Mapping[str, JSONValue], key: str) -> JSONObject:
    value = arguments.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"'{key}' must be an object.")
    return value


ASK_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question or task."},
        "agent": {
            "type": "string",
            "description": "The jarvis agent that answers (simple, orchestrator, react, rlm...; "
            "default: the configured one).",
        },
        "tools": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Tools for a tool-using agent, by name (calculator, think, "
            "SERVER.TOOL of a configured MCP server...).",
        },
        "session": {
            "type": "string",
            "description": "Continue the stored conversation of this name (started when it "
            "does not exist yet); without it the question is a one-off.",
        },
        "agent_options": {
            "type": "object",
            "description": "Settings of the agent (e.g. max_turns); some need the server's "
            "--allow-option.",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}
SESSIONS_LIST_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LISTED_SESSIONS},
    },
    "additionalProperties": False,
}
SESSION_SHOW_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "session": {"type": "string", "description": "The session's id (see sessions_list)."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SHOWN_MESSAGES,
            "description": "Only the last N messages.",
        },
    },
    "required": ["session"],
    "additionalProperties": False,
}
AGENT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Your message to the agent."}},
    "required": ["message"],
    "additionalProperties": False,
}


def answer_json(answer: Answer, session: str | None) -> JSONObject:
    """The structured content of an answer: what ``jarvis ask --json`` prints, minus the
    tool results' bodies (the model already has the answer)."""
    data: JSONObject = {
        "answer": answer.content,
        "turns": answer.turns,
        "usage": {
            "prompt_tokens": answer.usage.prompt_tokens,
            "completion_tokens": answer.usage.completion_tokens,
            "total_tokens": answer.usage.total_tokens,
        },
        "stop_reason": answer.stop_reason,
        "model": answer.model,
        "engine": answer.engine,
        "tool_calls": len(answer.tool_results),
    }
    if session is not None:
        data["session"] = session
    return data


class _Follower:
    """Tells ``progress`` of each step of a run (its text, tool calls, tool results) and
    keeps the answer."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.final: Answer | None = None

    async def text(self, update: TextDelta) -> None:
        if update.text:
            await self.progress(update.text[:MAX_PROGRESS_CHARS])

    async def tool_calls(self, update: ToolCallsRequested) -> None:
        await self.progress("calling " + ", ".join(c.name for c in update.calls))

    async def tool_result(self, update: ToolResultReady) -> None:
        result = update.result
        state = "done" if result.success else "failed"
        await self.progress(f"{result.tool_name} {state}: {result.content[:MAX_PROGRESS_CHARS]}")

    async def approval_required(self, update: ApprovalRequired) -> None:
        """Nothing to say: a call's result says whether it ran."""

    async def approval_decided(self, update: ApprovalDecided) -> None:
        """Nothing to say, as for :meth:`approval_required`."""

    async def answer(self, update: Answer) -> None:
        self.final = update


@dataclass(eq=False, slots=True)
class JarvisTools:
    """The tools ``jarvis mcp serve`` offers, over one runtime and its server state."""

    runtime: Runtime
    state: ServerState
    _persona: dict[str, ToolPort] = field(default_factory=dict)

    def _persona_tools(self) -> dict[str, ToolPort]:
        if not self._persona:
            ports: Sequence[ToolPort] = self.runtime.persona_tools()
            self._persona.update({p.spec.name: p for p in ports if p.spec.name in PERSONA_TOOLS})
        return self._persona

    async def offers(self) -> list[ToolOffer]:
        """Every tool, the managed agents' read from the store now (the list may change)."""
        offers = [
            ToolOffer(
                name="ask",
                description="Ask jarvis a question: an agent answers on the user's own engine "
                "(with tools when asked). Returns the answer; structured content says the "
                "turns, token usage and stop reason.",
                input_schema=ASK_SCHEMA,
            ),
            ToolOffer(
                name="sessions_list",
                description="List jarvis's stored conversations, most recently used first.",
                input_schema=SESSIONS_LIST_SCHEMA,
                read_only=True,
            ),
            ToolOffer(
                name="session_show",
                description="Show a stored jarvis conversation: its messages, tool calls and "
                "results.",
                input_schema=SESSION_SHOW_SCHEMA,
                read_only=True,
            ),
        ]
        for port in self._persona_tools().values():
            spec = port.spec
            offers.append(
                ToolOffer(
                    name=spec.name, description=spec.description, input_schema=spec.parameters
                )
            )
        for agent in await self.state.managed.all():
            title = agent.name or agent.id
            offers.append(
                ToolOffer(
                    name=AGENT_TOOL_PREFIX + agent.id,
                    description=f"Talk to the jarvis managed agent {title!r} (agent "
                    f"{agent.agent}); it keeps its own conversation.",
                    input_schema=AGENT_SCHEMA,
                )
            )
        return offers

    async def call(
        self, name: str, arguments: Mapping[str, JSONValue], progress: Progress
    ) -> ToolOutcome:
        """Run tool ``name``; every failure is an error outcome with jarvis's message. Its
        text is well-formed: a message stored with a lone surrogate (by an earlier version,
        or an application's engine) is shown with U+FFFD, where the SDK refused to encode the
        whole reply."""
        outcome = await self._call(name, arguments, progress)
        text, structured = outcome.text, outcome.structured
        if is_well_formed(text) and (structured is None or not holds_lone_surrogate(structured)):
            return outcome
        return ToolOutcome(
            text=well_formed(text),
            structured=None if structured is None else well_formed_object(structured),
            is_error=outcome.is_error,
        )

    async def _call(
        self, name: str, arguments: Mapping[str, JSONValue], progress: Progress
    ) -> ToolOutcome:
        from jarvis.entrypoints.http.errors import api_error

        try:
            if name == "ask":
                return await self._ask(arguments, progress)
            if name == "sessions_list":
                return await self._sessions_list(arguments)
            if name == "session_show":
                return await self._session_show(arguments)
            if name in PERSONA_TOOLS:
                return await self._persona_call(name, arguments)
            if name.startswith(AGENT_TOOL_PREFIX):
                return await self._agent(name.removeprefix(AGENT_TOOL_PREFIX), arguments, progress)
            return _failure(f"No tool named {name!r}.")
        except UsageError as exc:
            return _failure(f"Invalid arguments for {name}: {exc}")
        except PolicyError as exc:
            return _failure(str(exc))
        except Exception as exc:  # every failure is the client's to see, never a crash
            error = api_error(exc)
            return _failure(error.message)

    async def _ask(self, arguments: Mapping[str, JSONValue], progress: Progress) -> ToolOutcome:
        from jarvis.application.conversation import without_history

        question = _string(arguments, "question", required=True)
        assert question is not None
        agent = _string(arguments, "agent")
        session = _string(arguments, "session")
        options = _object(arguments, "agent_options")
        command = self.runtime.question(
            question.strip(),
            agent=agent,
            tools=_strings(arguments, "tools"),
            agent_options=options,
        )
        service = await self.runtime.service()
        self._allowed(service.registry, command.agent or service.default_agent, options)
        if session is None:
            updates: AsyncIterator[AnswerUpdate] = service.stream(command)
        else:
            session = check_session_id(session)
            conversations = await self.runtime.conversations()
            updates = without_history(conversations.stream(session, command))
        answer = await _follow(updates, progress)
        return ToolOutcome(text=answer.content, structured=answer_json(answer, session))

    def _allowed(
        self, registry: AgentRegistry, agent: str, options: Mapping[str, JSONValue]
    ) -> None:
        """``jarvis serve``'s run policy, its message naming this command's flags."""
        from jarvis.entrypoints.http.errors import ApiError

        try:
            self.state.policy.check(registry, agent, options)
        except ApiError as exc:
            message = exc.message.replace("over HTTP", "by an MCP client")
            raise PolicyError(message.replace("jarvis serve", "jarvis mcp serve")) from None

    async def _agent(
        self, agent_id: str, arguments: Mapping[str, JSONValue], progress: Progress
    ) -> ToolOutcome:
        message = _string(arguments, "message", required=True)
        assert message is not None
        managed = self.state.managed
        agent = await managed.get(agent_id)
        service = await self.runtime.service()
        self._allowed(service.registry, agent.agent, agent.agent_options)
        record = await managed.post(agent_id, message)
        answer = await _follow(managed.stream(agent_id, record), progress)
        return ToolOutcome(text=answer.content, structured=answer_json(answer, None))

    async def _sessions_list(self, arguments: Mapping[str, JSONValue]) -> ToolOutcome:
        limit = _limit(arguments, MAX_LISTED_SESSIONS)
        infos = await self.runtime.session_list().list_sessions(limit=limit)
        rows: list[JSONValue] = [info.as_json() for info in infos]
        text = "\n".join(
            f"{info.id}  {info.message_count} messages  {info.updated_at.isoformat()}  "
            f"{info.title}".rstrip()
            for info in infos
        )
        return ToolOutcome(text=text or "No sessions yet.", structured={"sessions": rows})

    async def _session_show(self, arguments: Mapping[str, JSONValue]) -> ToolOutcome:

        name = _string(arguments, "session", required=True)
        assert name is not None
        limit = _limit(arguments, MAX_SHOWN_MESSAGES) or MAX_SHOWN_MESSAGES
        records = (await self.runtime.session_list().records(check_session_id(name)))[-limit:]
        messages: list[JSONValue] = []
        lines: list[str] = []
        for record in records:
            data = message_to_record(record)
            data["time"] = record.created_at.isoformat()
            messages.append(data)
            message = record.message
            calls = ", ".join(f"{c.name}({c.arguments_json()})" for c in message.tool_calls)
            lines.append(
                f"{message.role.value}: {message.content}" + (f" → {calls}" if calls else "")
            )
        return ToolOutcome(
            text="\n".join(lines) or "The session is empty.",
            structured={"id": name, "message_count": len(records), "messages": messages},
        )

    async def _persona_call(self, name: str, arguments: Mapping[str, JSONValue]) -> ToolOutcome:
        port = self._persona_tools().get(name)
        if port is None:
            return _failure(f"The persona tool {name} is not available.")
        values: JSONObject = dict(arguments)
        errors = validate(values, port.spec.parameters)
        if errors:
            raise UsageError("; ".join(errors[:5]))
        result = await port.execute(values)
        return ToolOutcome(text=result.content, is_error=not result.success)


def _limit(arguments: Mapping[str, JSONValue], most: int) -> int | None:
    value = arguments.get("limit")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise UsageError(f"'limit' must be a whole number from 1 to {most}.")
    return value


async def _follow(updates: AsyncIterator[AnswerUpdate], progress: Progress) -> Answer:
    """Run ``updates`` to the end, telling ``progress`` each step; the answer.

    Cancelled (the client cancelled, or went away), the run's generator is closed at once,
    which cancels the engine's request and stores what a conversation completed."""
    from jarvis.application.run_updates import handle

    follower = _Follower(progress)
    async with contextlib.aclosing(updates) as steps:  # type: ignore[type-var]  # an async generator
        async for update in steps:
            await handle(update, follower)
    if follower.final is None:
        raise RuntimeError("The run ended without an answer.")
    return follower.final
