"""The operators use case: definitions, one tick, history, removal, and the scheduler.

A tick goes through the ask use case like any question (same tools, persona, model and
sampling rules), with the operator bound to it (``AskQuestion.operator``): the operative
agent recalls and saves the operator's state itself. Ticks of one operator never overlap:
each holds the operator's run lease (:func:`~jarvis.domain.operators.run_lease`), renewed
while it runs, wherever it runs.

The scheduler that runs the due ticks is :mod:`jarvis.application.operator_scheduler`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from jarvis.application.ask import Answer, AskQuestion
from jarvis.application.no_engine import NoInference
from jarvis.application.registry import AgentRegistry
from jarvis.application.schedules import (
    ScheduleError,
    check_time,
    label,
    latest_ticks,
    next_tick,
)
from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import (
    DEFINITION_PREFIX,
    OPERATIVE_AGENTS,
    Operator,
    OperatorBinding,
    check_operator_id,
    key_prefix,
    operator_from_record,
    operator_to_record,
    owner_of,
    run_lease,
    session_id_of,
)
from jarvis.domain.owned_stores import OwnedOperatorStore, OwnedSessionStore
from jarvis.domain.owners import Owner, OwnerGoneError, new_incarnation, vacancy
from jarvis.domain.ports import (
    EmbeddingPort,
    MemoryPort,
    OperatorStorePort,
    SessionStorePort,
)
from jarvis.domain.sessions.records import SessionMessage, SessionStoreCorruptError

CATCH_UP = 24
"""At most this many missed ticks are run when a scheduler resumes after a long stop."""
LEASE_TTL = 300.0
"""How long a lease outlives its holder's last renewal (renewed every third of it)."""
LISTED_IN_ERRORS = 20
CLOCK_SKEW_US = 300 * 1_000_000
"""A recorded tick may lie this far after now (the clocks of machines sharing a store
differ a little; a machine behind must not re-run ticks one ahead already ran); one later
than that means the clock went back, and the operator's progress is clamped."""


class UnknownOperatorError(ConfigurationError):
    """No operator has this name (exit code 2), naming the existing ones."""

    def __init__(self, name: str, existing: list[str], *, meanwhile: bool = False) -> None:
        listing = (
            "Existing operators: " + ", ".join(existing[:LISTED_IN_ERRORS]) + "."
            if existing
            else "There are no operators yet."
        )
        gone = (
            " (the one read was removed meanwhile; one added since under that name is"
            " another operator, left alone)"
            if meanwhile
            else ""
        )
        super().__init__(
            f"No operator named {name!r}{gone}. {listing}",
            hint="See them with `jarvis operators list`; add one with `jarvis operators add`.",
        )
        self.name = name
        self.existing = existing


class OperatorExistsError(ConfigurationError):
    """An operator of this name exists already (exit code 2), also when another process
    added it while this addition was under way."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"An operator named {name!r} exists already.",
            hint=f"Remove it first: jarvis operators remove {name}",
        )
        self.name = name


class OperatorBusyError(JarvisError):
    """Another tick of the operator is running (here or on another machine)."""


class Asker(Protocol):
    """What a tick runs on (:class:`~jarvis.application.ask.AskService`)."""

    registry: AgentRegistry

    async def ask(self, command: AskQuestion) -> Answer: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TickOutcome:
    """One tick: which operator, when it was due (``None``: asked for by hand), and its
    answer or the error that ended it."""

    operator: str
    tick_us: int | None
    answer: Answer | None = None
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorStatus:
    """An operator as listed."""

    operator: Operator
    last_tick_us: int | None
    next_tick_us: int | None
    ticks: int
    skipped: int = 0
    last_error: str = ""
    clamped_from_us: int | None = None
    """The recorded last tick when it lies in the future (the clock went back): the next
    tick shown is the one the schedule allows from now, which the scheduler runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokenOperator:
    """An operator whose stored row cannot be used (a damaged definition or progress, a
    schedule with no next tick, a time out of range): listed as broken and skipped by the
    scheduler, so that it never stops the others."""

    name: str
    reason: str


BROKEN = (ScheduleError, SessionStoreCorruptError)
"""What one operator's stored row can raise when it is unusable (not the store as a whole:
a store that cannot be reached still ends the command)."""


def new_holder() -> str:
    """A lease holder name unique to this scheduler: host, process, random."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class _Unused(NoInference):
    """An engine for checking options only: building an agent makes no inference."""

    def refusal(self) -> Exception:
        return RuntimeError("no inference while checking options")


class OperatorService:
    """Operators on a store: :meth:`add`, :meth:`get`, :meth:`list`, :meth:`remove`,
    :meth:`history` (no engine needed), and :meth:`tick` (on the ``asker``)."""

    def __init__(
        self,
        *,
        store: OperatorStorePort,
        sessions: SessionStorePort,
        registry: AgentRegistry,
        asker: Callable[[], Asker] | None = None,
        keyword_index: Callable[[], MemoryPort] | None = None,
        embeddings: Callable[[], EmbeddingPort | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.registry = registry
        self.asker = asker
        self.keyword_index = keyword_index
        self.embeddings = embeddings
        self.clock = clock

    def _now_us(self) -> int:
        return round(self.clock() * 1_000_000)

    # -- definitions ----------------------------------------------------------------------

    def check_agent(self, agent: str, options: JSONObject) -> str:
        """The agent key, when it is an operative and takes ``options``."""
        key = self.registry.resolve(agent)
        if key not in OPERATIVE_AGENTS:
            raise ConfigurationError(
                f"Agent '{key}' cannot run as an operator.",
                hint="Use --agent " + " or --agent ".join(OPERATIVE_AGENTS) + ".",
            )
        self.registry.create(key, AgentParts(inference=_Unused(), model="check"), options)
        return key

    async def add(self, operator: Operator) -> Operator:
        """Store a new operator; :class:`OperatorExistsError` when one of the name exists,
        also when another process on the store added it meanwhile: the store writes the
        definition only where there is none (:meth:`OperatorStorePort.put_state_if_absent`),
        so of concurrent additions exactly one wins and none replaces another's.

        What an earlier operator of the name kept (see :meth:`remove`) is cleared first,
        for the name's vacancy: only while no definition of it is stored, checked by the
        store in each clearing's transaction, so an addition that lost the race never
        clears the winner's state or history (the store refuses: "exists already" too)."""
        check_operator_id(operator.id)
        if not operator.prompt.strip():
            raise ConfigurationError(
                "An operator needs a prompt.", hint='Add --prompt "what each tick does".'
            )
        key = self.check_agent(operator.agent, operator.agent_options)
        if await self.store.get_state(DEFINITION_PREFIX + operator.id) is not None:
            raise OperatorExistsError(operator.id)
        created = operator.created_us or self._now_us()
        created = -(-created // 1_000_000) * 1_000_000  # on a whole second: ticks are too
        stored = Operator(
            id=operator.id,
            agent=key,
            prompt=operator.prompt,
            schedule=operator.schedule,
            tools=operator.tools,
            agent_options=operator.agent_options,
            model=operator.model,
            created_us=created,
            system_prompt=operator.system_prompt,
            incarnation=new_incarnation(),  # a tick of an earlier one never writes to it
        )
        try:
            await self._forget_kept(stored.id, vacancy(owner_of(stored)))
        except OwnerGoneError:
            raise OperatorExistsError(stored.id) from None
        record = operator_to_record(stored)
        if not await self.store.put_state_if_absent(DEFINITION_PREFIX + stored.id, record):
            raise OperatorExistsError(stored.id)
        return stored

    async def names(self) -> list[str]:
        keys = await self.store.state_keys(DEFINITION_PREFIX)
        return [k.removeprefix(DEFINITION_PREFIX) for k in keys]

    async def get(self, name: str) -> Operator:
        check_operator_id(name)
        value = await self.store.get_state(DEFINITION_PREFIX + name)
        if value is None:
            raise UnknownOperatorError(name, await self.names())
        try:
            return operator_from_record(value)
        except ValueError as exc:
            raise SessionStoreCorruptError(f"Operator {name!r} is damaged ({exc}).") from exc

    async def list(self) -> list[Operator]:
        return [await self.get(name) for name in await self.names()]

    async def status(self, operator: Operator) -> OperatorStatus:
        progress = await self.progress(operator.id)
        last = stored_int(progress.get("last_tick_us"))
        after, clamped_from = self.resume_point(operator, last, self._now_us())
        return OperatorStatus(
            operator=operator,
            last_tick_us=last,
            next_tick_us=next_tick(
                operator.schedule, anchor_us=operator.created_us, after_us=after
            ),
            ticks=stored_int(progress.get("ticks")) or 0,
            skipped=stored_int(progress.get("skipped")) or 0,
            last_error=str(progress.get("last_error") or ""),
            clamped_from_us=clamped_from,
        )

    def resume_point(
        self, operator: Operator, last: int | None, now_us: int
    ) -> tuple[int, int | None]:
        """Where the schedule goes on from (the last tick, else the creation) and, when the
        recorded last tick lies in the future beyond :data:`CLOCK_SKEW_US` (the clock went
        back: the operator would stay silent until the clock catches up), that recorded
        tick: the schedule then goes on from its latest tick at or before now."""
        if last is None:
            return check_time(operator.created_us), None
        if check_time(last) <= now_us + CLOCK_SKEW_US:
            return last, None
        # go on from the tick before the latest one due: the latest is then due now
        latest = latest_ticks(
            operator.schedule, anchor_us=operator.created_us, now_us=now_us, count=2
        )
        return (latest[0] if len(latest) == 2 else operator.created_us), last

    async def survey(self) -> Sequence[OperatorStatus | BrokenOperator]:
        """Every operator's status, a broken one reported as such instead of ending the
        listing."""
        found: list[OperatorStatus | BrokenOperator] = []
        for name in await self.names():
            try:
                found.append(await self.status(await self.get(name)))
            except UnknownOperatorError:
                continue  # removed meanwhile
            except BROKEN as exc:
                found.append(BrokenOperator(name=name, reason=exc.message))
        return found

    async def remove(self, name: str) -> None:
        """Forget the operator read: its definition, everything it kept, its session. Only
        that very definition: one removed meanwhile, even if added again since, is left
        alone with what it keeps (``UnknownOperatorError``, as for an unknown name).

        What it kept goes first, so that a removal cut short leaves the operator (remove it
        again), never its state or history without it for an operator added later under
        the same name to find. It is deleted only while the definition read is stored, and
        the definition only while it is the one read (each checked by the store in its
        transaction: :func:`owner_of`); from then on the store refuses its ticks' writes.
        What a tick wrote between the two steps is cleared last, for the name's vacancy:
        only while no definition of the name is stored, so never what an operator added
        again meanwhile keeps (its addition cleared it then, see :meth:`add`)."""
        operator = await self.get(name)
        owner = owner_of(operator)
        try:
            await self._forget_kept(name, owner)
            # exactly this key: never op10's with op1's
            await self.store.delete_key(DEFINITION_PREFIX + name, owner=owner)
        except OwnerGoneError:
            raise UnknownOperatorError(name, await self.names(), meanwhile=True) from None
        with contextlib.suppress(OwnerGoneError):  # added again: its addition cleared it
            await self._forget_kept(name, vacancy(owner))

    async def _forget_kept(self, name: str, owner: Owner) -> None:
        """Delete the state and the session of ``name`` only while ``owner`` is stored
        (else ``OwnerGoneError``): the definition being removed, or the name's vacancy,
        for an addition (no tick can write while no definition of the name is stored, but
        another process may add one at any time)."""
        await self.store.delete_state(key_prefix(name), owner=owner)
        await self.sessions.delete(session_id_of(name), owner=owner)

    async def history(self, name: str, *, limit: int | None = None) -> tuple[SessionMessage, ...]:
        await self.get(name)
        return await self.sessions.load_records(session_id_of(name), limit=limit)

    async def progress(self, operator_id: str) -> JSONObject:
        value = await self.store.get_state(key_prefix(operator_id) + "schedule")
        return value if isinstance(value, dict) else {}

    # -- ticks ------------------------------------------------------------------------------

    def binding(self, operator: Operator, tick_label: str) -> OperatorBinding:
        """What a tick of ``operator`` runs on: stores whose every write is this very
        definition's, refused once it is removed (even if added again meanwhile)."""
        owner = owner_of(operator)
        return OperatorBinding(
            operator_id=operator.id,
            sessions=OwnedSessionStore(self.sessions, owner),
            store=OwnedOperatorStore(self.store, owner),
            keyword_index=self.keyword_index,
            embeddings=self.embeddings() if self.embeddings is not None else None,
            tick_label=tick_label,
        )

    async def run(self, operator: Operator, tick_label: str) -> Answer:
        """One tick of ``operator`` now (the caller holds its run lease)."""
        if self.asker is None:
            raise ConfigurationError("No engine is configured to run operator ticks.")
        return await self.asker().ask(
            AskQuestion(
                question=operator.prompt,
                agent=operator.agent,
                model=operator.model,
                tools=operator.tools,
                agent_options=operator.agent_options,
                system_prompt=operator.system_prompt,
                operator=self.binding(operator, tick_label),
            )
        )

    async def ask(self, name: str, question: AskQuestion) -> Answer:
        """``question`` as one tick of operator ``name``, created for it when it does not
        exist yet (``jarvis ask -a operative``; of two first calls at once, one adds it and
        both run it): the operator keeps its state and history for the next such call. The
        question is the tick's prompt; its agent, tools, model, options and system prompt
        replace the stored ones for this tick only."""
        agent = self.check_agent(question.agent or "operative", question.agent_options)
        if name not in await self.names():
            # added meanwhile by another process: that one is run
            with contextlib.suppress(OperatorExistsError):
                await self.add(
                    Operator(
                        id=name,
                        agent=agent,
                        prompt=question.question,
                        tools=question.tools,
                        agent_options=question.agent_options,
                        model=question.model,
                        system_prompt=question.system_prompt,
                    )
                )
        stored = await self.get(name)
        operator = replace(
            stored,
            agent=agent,
            prompt=question.question,
            tools=question.tools or stored.tools,
            agent_options=question.agent_options or stored.agent_options,
            model=question.model or stored.model,
            system_prompt=stored.system_prompt
            if question.system_prompt is None
            else question.system_prompt,
        )
        return await self.tick(name, operator=operator)

    async def tick(
        self, name: str, *, holder: str | None = None, operator: Operator | None = None
    ) -> Answer:
        """One tick of operator ``name`` now, outside its schedule (``jarvis operators
        tick``); ``OperatorBusyError`` while another of its ticks runs. ``operator``: the
        definition to run instead of the stored one (:meth:`ask`)."""
        operator = operator or await self.get(name)
        owner = holder or new_holder()
        async with self.leased(run_lease(operator.id), owner) as held:
            if not held:
                raise OperatorBusyError(
                    f"A tick of operator {name!r} is running; try again when it is done.",
                    hint="Its scheduler (jarvis operators run) holds it.",
                )
            return await self.run(operator, label(self._now_us()) + " (by hand)")

    @contextlib.asynccontextmanager
    async def leased(
        self, name: str, holder: str, *, also: Sequence[str] = (), ttl: float = LEASE_TTL
    ) -> AsyncIterator[bool]:
        """Hold lease ``name`` (renewing it, and ``also``, every ``ttl / 3``) for the
        block; yields whether it was taken. Released on the way out."""
        if not await self.store.acquire_lease(name, holder, ttl):
            yield False
            return

        async def renew() -> None:
            while True:
                await asyncio.sleep(ttl / 3)
                for lease in (name, *also):
                    with contextlib.suppress(JarvisError):
                        await self.store.renew_lease(lease, holder, ttl)

        renewer = asyncio.create_task(renew())
        try:
            yield True
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            with contextlib.suppress(JarvisError):
                await self.store.release_lease(name, holder)


def stored_int(value: JSONValue | None) -> int | None:
    """A stored count or time (``None``: absent, or not a whole number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
