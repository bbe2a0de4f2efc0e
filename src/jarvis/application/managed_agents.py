"""Managed agents: persisted definitions, their conversations, and running them.

A message to a managed agent is stored *before* the agent runs (so a crash or a client that
goes away never loses what the user said), the run gets the conversation so far as context
(bounded by :func:`~jarvis.domain.session_history.trim_history`, tool exchanges kept whole),
and the answer is stored after it as the run produced it: each assistant turn with its tool
calls (ids included), each tool result, then the final answer, so the conversation replays
exactly into the next run. A run that is cancelled stores what it completed: whole tool
exchanges and the text streamed so far.

The agent is any agent of the registry, built through :class:`AskService` as ``jarvis ask``
builds it: the same tool loop, budgets and persona.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.domain.agent_contract import AgentContext
from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.managed_agents import (
    ManagedAgent,
    ManagedAgentStorePort,
    check_agent_id,
    session_id_of,
)
from jarvis.domain.messages import Message, Role
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.session_history import trim_history
from jarvis.domain.sessions import SessionMessage, to_micros, utc_now
from jarvis.domain.updates import RunUpdate, TextDelta, ToolCallsRequested, ToolResultReady

SAVE_TIMEOUT = 10.0
"""Seconds a cancelled run may still spend storing what it completed."""


class ManagedAgentNotFoundError(JarvisError):
    """No managed agent has this id."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"No managed agent with id {agent_id!r}.")
        self.agent_id = agent_id


class NothingToRunError(JarvisError):
    """``run`` was asked for while no user message waits for an answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedAgentSpec:
    """The fields of a definition a client sets (``id`` only at creation)."""

    id: str | None = None
    name: str = ""
    agent: str = "simple"
    model: str | None = None
    system_prompt: str | None = None
    tools: tuple[str, ...] = ()
    persona: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    agent_options: JSONObject = field(default_factory=dict)


def _apply(agent: ManagedAgent, spec: ManagedAgentSpec, fields_set: Sequence[str]) -> ManagedAgent:
    changes = {name: getattr(spec, name) for name in fields_set if name != "id"}
    return replace(agent, **changes)


class Transcript:
    """Turns a run's updates into the messages to store, in the order they happened."""

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.records: list[SessionMessage] = []
        self._text: list[str] = []
        self._waiting: set[str] = set()
        self._pending: list[SessionMessage] = []
        """The current tool exchange: stored only once every call has its result."""

    def feed(self, update: RunUpdate | Answer) -> None:
        if isinstance(update, TextDelta):
            self._text.append(update.text)
        elif isinstance(update, ToolCallsRequested):
            self._flush_exchange()
            text, self._text = "".join(self._text), []
            self._pending = [
                SessionMessage(message=Message.assistant(text, update.calls), model=self.model)
            ]
            self._waiting = {call.id for call in update.calls}
        elif isinstance(update, ToolResultReady):
            result = update.result
            self._pending.append(
                SessionMessage(
                    message=Message.tool(
                        result.content, tool_call_id=result.call_id, name=result.tool_name
                    )
                )
            )
            self._waiting.discard(result.call_id)
            if not self._waiting:
                self._flush_exchange()
        elif isinstance(update, Answer):
            self._flush_exchange()
            self._text = []
            self.records = [
                replace(r, model=update.model)
                if r.message.role is Role.ASSISTANT and not r.model
                else r
                for r in self.records
            ]
            self.records.append(
                SessionMessage(
                    message=Message.assistant(update.content),
                    model=update.model,
                    usage=update.usage,
                )
            )

    def _flush_exchange(self) -> None:
        if self._pending and not self._waiting:
            self.records.extend(self._pending)
        self._pending = []
        self._waiting = set()

    def interrupted(self) -> list[SessionMessage]:
        """What a cancelled run completed: whole exchanges, and the text streamed since."""
        self._pending = [] if self._waiting else self._pending
        self._flush_exchange()
        text = "".join(self._text)
        if text.strip():
            self.records.append(SessionMessage(message=Message.assistant(text), model=self.model))
        self._text = []
        return self.records


class ManagedAgentService:
    """Definitions in ``agents``, conversations in ``sessions``, runs through ``ask``."""

    def __init__(
        self,
        *,
        agents: ManagedAgentStorePort,
        sessions: SessionStorePort,
        ask: Callable[[], Awaitable[AskService]],
        history_messages: int = 40,
        history_tokens: int = 3000,
        max_listed_messages: int = 1000,
    ) -> None:
        self.agents = agents
        self.sessions = sessions
        self.ask = ask
        self.history_messages = history_messages
        self.history_tokens = history_tokens
        self.max_listed_messages = max_listed_messages

    # -- definitions -----------------------------------------------------------------------

    async def check(self, agent: ManagedAgent) -> None:
        """Refuse a definition that could never run (unknown agent, tools on an agent that
        takes none, options the agent does not read, an unknown persona), as ``jarvis ask``
        would, without calling the engine."""
        service = await self.ask()
        command = replace(self.question(agent, "check"), model=agent.model or "check")
        key = service.registry.resolve(agent.agent)
        if getattr(service.registry.get(key), "wraps_agent", False):
            return  # the sandboxed agent is checked when it runs (it starts a container)
        await service.build_agent(command)

    async def create(self, spec: ManagedAgentSpec) -> ManagedAgent:
        agent_id = check_agent_id(spec.id) if spec.id else "ma_" + secrets.token_hex(8)
        if await self.agents.get(agent_id) is not None:
            raise ConfigurationError(f"A managed agent with id {agent_id!r} exists already.")
        now = to_micros(utc_now())
        agent = ManagedAgent(
            id=agent_id,
            name=spec.name,
            agent=spec.agent,
            model=spec.model,
            system_prompt=spec.system_prompt,
            tools=spec.tools,
            persona=spec.persona,
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            max_turns=spec.max_turns,
            agent_options=spec.agent_options,
            created_us=now,
            updated_us=now,
        )
        await self.check(agent)
        await self.agents.put(agent)
        return agent

    async def get(self, agent_id: str) -> ManagedAgent:
        agent = await self.agents.get(check_agent_id(agent_id))
        if agent is None:
            raise ManagedAgentNotFoundError(agent_id)
        return agent

    async def all(self) -> list[ManagedAgent]:
        """Every definition, oldest first."""
        return await self.agents.list()

    async def update(
        self, agent_id: str, spec: ManagedAgentSpec, fields_set: Sequence[str]
    ) -> ManagedAgent:
        agent = _apply(await self.get(agent_id), spec, fields_set)
        agent = replace(agent, updated_us=max(agent.updated_us, to_micros(utc_now())))
        await self.check(agent)
        await self.agents.put(agent)
        return agent

    async def delete(self, agent_id: str) -> None:
        """Forget the definition and its conversation."""
        if not await self.agents.delete(check_agent_id(agent_id)):
            raise ManagedAgentNotFoundError(agent_id)
        await self.sessions.delete(session_id_of(agent_id))

    # -- conversation ----------------------------------------------------------------------

    async def messages(self, agent_id: str, *, limit: int | None = None) -> list[SessionMessage]:
        await self.get(agent_id)
        bound = self.max_listed_messages if limit is None else min(limit, self.max_listed_messages)
        return list(await self.sessions.load_records(session_id_of(agent_id), limit=bound))

    async def post(self, agent_id: str, content: str) -> SessionMessage:
        """Store a user message (it waits for :meth:`run`, or is answered at once by
        :meth:`stream` when streaming)."""
        await self.get(agent_id)
        if not content.strip():
            raise ConfigurationError("The message is empty.")
        record = SessionMessage(message=Message.user(content))
        await self.sessions.append_records(session_id_of(agent_id), [record])
        return record

    def question(
        self, agent: ManagedAgent, text: str, history: tuple[Message, ...] = ()
    ) -> AskQuestion:
        options: JSONObject = dict(agent.agent_options)
        if agent.max_turns is not None:
            options["max_turns"] = agent.max_turns
        return AskQuestion(
            question=text,
            agent=agent.agent,
            model=agent.model,
            # unset: AskService applies ``[agent] temperature`` / ``max_tokens``, as for
            # ``jarvis ask`` (and says where the sampling came from)
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            system_prompt=agent.system_prompt,
            tools=agent.tools,
            persona=agent.persona,
            context=AgentContext(conversation=history) if history else None,
            agent_options=options,
        )

    async def prepare(
        self, agent_id: str, pending: SessionMessage | None = None
    ) -> tuple[ManagedAgent, AskQuestion]:
        """The question of ``pending`` (a message :meth:`post` stored), else of the user
        message that waits at the end of the conversation, with the conversation before
        it. Other clients' messages stored meanwhile stay in the history; they never make
        this one unanswerable."""
        agent = await self.get(agent_id)
        stored = list(
            await self.sessions.load_records(
                session_id_of(agent_id), limit=self.history_messages + 1
            )
        )
        if pending is not None:
            if pending in stored:
                stored.remove(pending)
            question = pending.message.content
        elif stored and stored[-1].message.role is Role.USER:
            question = stored.pop().message.content
        else:
            raise NothingToRunError(
                f"Managed agent {agent_id!r} has no message waiting for an answer.",
                hint="POST a message first.",
            )
        history = trim_history(
            [r.message for r in stored],
            max_messages=self.history_messages,
            max_tokens=self.history_tokens,
        )
        return agent, self.question(agent, question, history.messages)

    async def stream(
        self, agent_id: str, pending: SessionMessage | None = None
    ) -> AsyncIterator[RunUpdate | Answer]:
        """Run the agent on ``pending`` (else the waiting message): its updates, then the
        :class:`Answer`.

        What the run produced is stored when it ends, also when it fails or is cancelled
        (closing this generator cancels the run)."""
        agent, command = await self.prepare(agent_id, pending)
        service = await self.ask()
        transcript = Transcript(agent.model or "")
        finished = False
        try:
            async for update in service.stream(command):
                transcript.feed(update)
                if isinstance(update, Answer):
                    finished = True
                yield update
        finally:
            records = transcript.records if finished else transcript.interrupted()
            if records:
                await _shielded(self.sessions.append_records(session_id_of(agent_id), records))

    async def run(self, agent_id: str) -> Answer:
        """:meth:`stream` to the end: the answer."""
        answer: Answer | None = None
        async for update in self.stream(agent_id):
            if isinstance(update, Answer):
                answer = update
        assert answer is not None  # AskService.stream always ends with the answer
        return answer


async def _shielded(save: Awaitable[None]) -> None:
    """Finish ``save`` even while the caller is being cancelled (bounded in time)."""
    task = asyncio.ensure_future(asyncio.wait_for(save, SAVE_TIMEOUT))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task}, timeout=SAVE_TIMEOUT)
        raise
