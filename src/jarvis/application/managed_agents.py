"""Managed agents: persisted definitions, their conversations, and running them.

A message to a managed agent is stored *before* the agent runs (so a crash or a client that
goes away never loses what the user said); running it is the conversation use case's
"answer the stored question" turn (:meth:`ConversationService.answer`), so managed agents
and ``jarvis ask -c`` / ``jarvis chat`` / the SDK share one history policy
(:class:`HistoryLimits`, tool exchanges kept whole) and one recorder: each assistant turn
with its tool calls (ids included), each tool result as the model was shown it, then the
final answer, so the conversation replays exactly into the next run. A run that fails or is
cancelled stores what it completed: whole tool exchanges and the text streamed so far.

The agent is any agent of the registry, built through :class:`AskService` as ``jarvis ask``
builds it: the same tool loop, budgets and persona.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.conversation import (
    ConversationService,
    HistoryLimits,
    HistoryUsed,
    PendingTurn,
    without_history,
)
from jarvis.application.managed_runs import ManagedRuns
from jarvis.application.run_updates import AnswerUpdate, answer_of
from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.managed_agents import (
    ManagedAgent,
    ManagedAgentFields,
    ManagedAgentStorePort,
    Position,
    check_agent_id,
    owner_of,
    position_of,
    session_id_of,
)
from jarvis.domain.owners import Owner, OwnerGoneError, new_incarnation, vacancy
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.sessions.records import SessionMessage, SessionPage, to_micros, utc_now

if TYPE_CHECKING:
    from jarvis.application.managed_approvals import ManagedApprovals


class ManagedAgentNotFoundError(JarvisError):
    """No managed agent has this id."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"No managed agent with id {agent_id!r}.")
        self.agent_id = agent_id


class NothingToRunError(JarvisError):
    """``run`` was asked for while no user message waits for an answer."""


class QuotaExceededError(JarvisError):
    """A quota of the server (definitions, messages waiting) would be exceeded."""


DEFAULT_MAX_AGENTS = 1000
DEFAULT_MAX_QUEUED_MESSAGES = 100
DEFAULT_PAGE = 100
MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class AgentPage:
    """One page of definitions, oldest first; ``next`` continues after it (None: the end)."""

    agents: list[ManagedAgent]
    next: str | None


def cursor_of(position: Position) -> str:
    """The opaque ``after`` value that continues a listing after ``position``."""
    return f"{position[0]}.{position[1]}"


def position_from(cursor: str) -> Position:
    """The position a :func:`cursor_of` value names; ``ConfigurationError`` for any other."""
    created, _, agent_id = cursor.partition(".")
    if not created.isascii() or not created.isdigit() or len(created) > 19 or not agent_id:
        raise ConfigurationError(
            "Invalid 'after' cursor.", hint="Pass the 'next' value of the previous page."
        )
    return (int(created), check_agent_id(agent_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedAgentSpec(ManagedAgentFields):
    """The fields of a definition a client sets (``id`` only at creation)."""

    id: str | None = None


def _exists(agent_id: str) -> ConfigurationError:
    return ConfigurationError(f"A managed agent with id {agent_id!r} exists already.")


def _apply(agent: ManagedAgent, spec: ManagedAgentSpec, fields_set: Sequence[str]) -> ManagedAgent:
    changes = {name: getattr(spec, name) for name in fields_set if name != "id"}
    return replace(agent, **changes)


class ManagedAgentService:
    """Definitions in ``agents``, conversations in ``sessions``, runs through ``ask``."""

    def __init__(
        self,
        *,
        agents: ManagedAgentStorePort,
        sessions: SessionStorePort,
        ask: Callable[[], Awaitable[AskService]],
        limits: HistoryLimits | None = None,
        max_listed_messages: int = 1000,
        max_agents: int = DEFAULT_MAX_AGENTS,
        max_queued_messages: int = DEFAULT_MAX_QUEUED_MESSAGES,
        approvals: ManagedApprovals | None = None,
    ) -> None:
        self.agents = agents
        self.approvals = approvals
        """Where runs wait for their tool calls' approvals (``None``: every call runs)."""
        self.sessions = sessions
        self.ask = ask
        self.limits = limits or HistoryLimits()
        """``[sessions] history_messages/_tokens``, as for every conversation."""
        self.max_listed_messages = max_listed_messages
        self.max_agents = max_agents
        """The most definitions the store may hold (a creation beyond it is refused)."""
        self.max_queued_messages = max_queued_messages
        """The most user messages one agent may have waiting for an answer."""
        self._creating = asyncio.Lock()  # count-then-store is one step in this process
        self._runs = ManagedRuns()  # what a deletion stops in this process

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
        """Store a new definition; ``ConfigurationError`` when one of the id exists already,
        also when another server (or worker) on the store created it meanwhile: the store
        creates it only where there is none (:meth:`ManagedAgentStorePort.create`), so of
        concurrent creations exactly one wins and none replaces another's definition.

        What an earlier agent of the id left (see :meth:`delete`) is cleared first, for
        the id's vacancy: only while no definition of it is stored, checked by the store
        in each clearing's transaction, so a creation that lost the race never clears the
        winner's conversation or approvals (the store refuses: "exists already" too)."""
        agent_id = check_agent_id(spec.id) if spec.id else "ma_" + secrets.token_hex(8)
        if await self.agents.get(agent_id) is not None:
            raise _exists(agent_id)
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
            memory=spec.memory,
            created_us=now,
            updated_us=now,
            incarnation=new_incarnation(),  # a run of an earlier one never writes to it
        )
        await self.check(agent)
        async with self._creating:
            if await self.agents.count() >= self.max_agents:
                raise QuotaExceededError(
                    f"The server holds {self.max_agents} managed agents, its limit: delete one "
                    "first (or start the server with a higher --max-agents)."
                )
            if await self.agents.get(agent_id) is not None:
                raise _exists(agent_id)
            try:
                await self._forget_kept(agent_id, vacancy(owner_of(agent)))
            except OwnerGoneError:
                raise _exists(agent_id) from None
            if not await self.agents.create(agent):
                raise _exists(agent_id)
        return agent

    async def get(self, agent_id: str) -> ManagedAgent:
        agent = await self.agents.get(check_agent_id(agent_id))
        if agent is None:
            raise ManagedAgentNotFoundError(agent_id)
        return agent

    async def all(self) -> list[ManagedAgent]:
        """Every definition, oldest first (at most :attr:`max_agents` of them)."""
        return await self.agents.list(limit=self.max_agents)

    async def page(self, *, limit: int | None = None, after: str | None = None) -> AgentPage:
        """At most ``limit`` definitions (:data:`DEFAULT_PAGE` unless given, never more
        than :data:`MAX_PAGE`), oldest first, after the ``after`` cursor of a previous page."""
        size = DEFAULT_PAGE if limit is None else max(1, min(limit, MAX_PAGE))
        start = None if after is None else position_from(after)
        agents = await self.agents.list(after=start, limit=size + 1)
        if len(agents) <= size:
            return AgentPage(agents, None)
        agents = agents[:size]
        return AgentPage(agents, cursor_of(position_of(agents[-1])))

    async def update(
        self,
        agent_id: str,
        spec: ManagedAgentSpec,
        fields_set: Sequence[str],
        *,
        allow: Callable[[ManagedAgent], Awaitable[None]] | None = None,
    ) -> ManagedAgent:
        """Change the definition stored now, and only it. ``allow`` (the server's policy)
        and :meth:`check` may refuse the changed definition first; it is stored only while
        the one read is (the store checks its incarnation), else
        ``ManagedAgentNotFoundError``, as for an unknown id: a change read before a
        deletion never brings the agent back, nor lands on one created again since."""
        agent = _apply(await self.get(agent_id), spec, fields_set)
        agent = replace(agent, updated_us=max(agent.updated_us, to_micros(utc_now())))
        if allow is not None:
            await allow(agent)
        await self.check(agent)
        if not await self.agents.update(agent):
            raise ManagedAgentNotFoundError(agent_id)
        return agent

    async def delete(self, agent_id: str) -> None:
        """Forget the definition read, its conversation and its approvals, and cancel its
        runs in this process. Only that very definition: one deleted meanwhile, even if
        created again since, is left alone, with what it keeps
        (``ManagedAgentNotFoundError``, as for an unknown id).

        What it keeps goes first, so that a deletion cut short leaves the agent (delete it
        again), never a conversation or approvals without it for an agent created later
        under the same id to inherit. It is deleted only while the definition read is
        stored, and the definition only while it is the one read (each checked by the
        store in its transaction: :func:`owner_of`). From then on the store refuses its
        runs' writes (each names the definition it ran for), and its runs here are
        cancelled where they wait (:mod:`.managed_runs`). What a run wrote between the
        two steps is cleared last, for the id's vacancy: only while no definition of the
        id is stored, so never what an agent created again meanwhile keeps (its creation
        cleared it then, see :meth:`create`)."""
        agent = await self.get(agent_id)
        owner = owner_of(agent)
        try:
            await self._forget_kept(agent_id, owner)
        except OwnerGoneError:
            raise ManagedAgentNotFoundError(agent_id) from None
        if not await self.agents.delete(agent_id, agent.incarnation):
            raise ManagedAgentNotFoundError(agent_id)
        self._runs.stop(agent_id, agent.incarnation)
        with contextlib.suppress(OwnerGoneError):  # created again: its creation cleared it
            await self._forget_kept(agent_id, vacancy(owner))

    async def _forget_kept(self, agent_id: str, owner: Owner) -> None:
        """Delete the conversation and the approvals of ``agent_id`` only while ``owner``
        is stored (else ``OwnerGoneError``): the definition being deleted, or the id's
        vacancy, for a creation (no run can write while no definition of the id is
        stored, but another process may create one at any time)."""
        await self.sessions.delete(session_id_of(agent_id), owner=owner)
        if self.approvals is not None:
            await self.approvals.forget(agent_id, owner=owner)

    # -- conversation ----------------------------------------------------------------------

    async def messages(self, agent_id: str, *, limit: int | None = None) -> list[SessionMessage]:
        """The newest ``limit`` messages (never more than :attr:`max_listed_messages`)."""
        return (await self.recent_messages(agent_id, limit=limit))[0]

    async def recent_messages(
        self, agent_id: str, *, limit: int | None = None
    ) -> tuple[list[SessionMessage], bool]:
        """:meth:`messages`, and whether older ones were left out."""
        page = await self.message_page(agent_id, limit=limit)
        return list(page.records), page.start > 0

    async def message_page(
        self, agent_id: str, *, limit: int | None = None, before: int | None = None
    ) -> SessionPage:
        """The newest ``limit`` messages (never more than :attr:`max_listed_messages`) whose
        position in the conversation is below ``before`` (all when ``None``). The next page
        back is ``before=page.start``; ``start`` 0 means nothing older is left. With
        ``limit=0`` the page is empty and ``start`` counts the messages below ``before``."""
        await self.get(agent_id)
        bound = self.max_listed_messages if limit is None else min(limit, self.max_listed_messages)
        session_id = session_id_of(agent_id)
        if bound > 0:
            return await self.sessions.load_page(session_id, limit=bound, before=before)
        newest = await self.sessions.load_page(session_id, limit=1, before=before)
        return SessionPage(start=newest.start + len(newest.records), records=())

    async def post(self, agent_id: str, content: str) -> SessionMessage:
        """Store a user message (it waits for :meth:`run`, or is answered at once by
        :meth:`stream` when streaming), while the agent is stored (``OwnerGoneError`` when
        it was deleted meanwhile)."""
        agent = await self.get(agent_id)
        if not content.strip():
            raise ConfigurationError("The message is empty.")
        if await self.waiting(agent_id) >= self.max_queued_messages:
            raise QuotaExceededError(
                f"Managed agent {agent_id!r} has {self.max_queued_messages} messages waiting "
                "for an answer, its limit: run it first (POST .../run), or start the server "
                "with a higher --max-queued-messages."
            )
        record = SessionMessage(message=Message.user(content))
        await self.sessions.append_records(session_id_of(agent_id), [record], owner=owner_of(agent))
        return record

    async def waiting(self, agent_id: str) -> int:
        """How many user messages wait at the end of the conversation (counted up to
        :attr:`max_queued_messages`: no more is read)."""
        tail = await self.sessions.load_records(
            session_id_of(agent_id), limit=self.max_queued_messages
        )
        count = 0
        for record in reversed(tail):
            if record.message.role is not Role.USER:
                break
            count += 1
        return count

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
            memory=agent.memory,
        )

    async def conversations(self) -> ConversationService:
        """The conversation use case over this loop's ``AskService`` (cheap: no I/O)."""
        return ConversationService(await self.ask(), self.sessions, limits=self.limits)

    async def history(self, agent_id: str) -> HistoryUsed:
        """What the agent's next run replays (``describe()`` says what was left out)."""
        await self.get(agent_id)
        return await (await self.conversations()).history(session_id_of(agent_id))

    async def prepare(
        self, agent_id: str, pending: SessionMessage | None = None
    ) -> tuple[ManagedAgent, PendingTurn]:
        """The turn of ``pending`` (a message :meth:`post` stored), else of the user message
        that waits at the end of the conversation, with the conversation before it. Other
        clients' messages stored meanwhile stay in the history; they never make this one
        unanswerable."""
        agent = await self.get(agent_id)
        turn = await (await self.conversations()).pending(session_id_of(agent_id), pending)
        if turn is None:
            raise NothingToRunError(
                f"Managed agent {agent_id!r} has no message waiting for an answer.",
                hint="POST a message first.",
            )
        return agent, turn

    async def stream(
        self, agent_id: str, pending: SessionMessage | None = None, *, memory: bool | None = None
    ) -> AsyncGenerator[AnswerUpdate, None]:
        """Run the agent on ``pending`` (else the waiting message): its updates, then the
        :class:`Answer`, yielded once stored. ``memory`` overrides the definition's
        ``memory`` for this run (``None``: the definition's, else the server's setting); the
        answer's ``metadata["memory_results"]`` names the chunks the run received.

        What the run produced is stored also when it fails or is cancelled (closing this
        generator cancels the run, and stores what it completed before it returns).
        Nothing is stored once the agent was deleted (even if created again since): the
        answer's append raises ``OwnerGoneError`` instead; deleted through this service,
        the run is cancelled at once and raises ``RunCancelledError``."""
        with self._runs.run(agent_id) as run:
            agent, turn = await self.prepare(agent_id, pending)
            run.runs(agent.incarnation)
            conversations = await self.conversations()
            command = self.question(agent, turn.question.message.content)
            if memory is not None:
                command = replace(command, memory=memory)
            if self.approvals is not None:
                choice = self.approvals.choice_for(agent_id, owner_of(agent))
                command = replace(command, approval=choice)
            turn_updates = conversations.answer(
                session_id_of(agent_id), turn, command, owner=owner_of(agent)
            )
            async with aclosing(without_history(turn_updates)) as updates:
                while (update := await run.next(updates)) is not None:
                    yield update

    async def run(self, agent_id: str, *, memory: bool | None = None) -> Answer:
        """:meth:`stream` to the end: the answer. Cancelling it closes the run at once
        (what it completed is stored, as when a stream is closed); so does deleting the
        agent (``RunCancelledError``)."""
        answer: Answer | None = None
        async with aclosing(self.stream(agent_id, memory=memory)) as updates:
            async for update in updates:
                found = answer_of(update)
                if found is not None:
                    answer = found
        assert answer is not None  # AskService.stream always ends with the answer
        return answer
