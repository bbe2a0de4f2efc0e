"""What the CLI and the SDK share: a configured container, its engine, and the ask use case.

A :class:`Runtime` wraps one container, put together by
:func:`~jarvis.entrypoints.bootstrap.bootstrap`. On first use it resolves the engine choice
(unless a test or an embedding app has overridden ``container.inference``), hands it to the
container and resolves the :class:`~jarvis.application.ask.AskService`, so that every
question of a CLI command or of a ``Jarvis`` instance reuses the same engine and its
connection pool.

A runtime serves any number of event loops (a ``Jarvis`` instance is awaited on its
callers' loops and runs its synchronous API on a private one), because a pooled HTTP client
belongs to the loop it was first used on: each loop gets its own ask service. The first
loop uses the container's own engine; another loop, while that one lives, gets its own
instance of the same engine (an HTTP engine: one connection pool per loop; the embedded
engine runs in threads and serves every loop). A loop's engines are closed on that loop:
by :meth:`Runtime.aclose`, or when the loop shuts down (``asyncio.run`` closes the
asynchronous generators of a loop before closing it, and one such generator per loop
closes what the loop used).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, Unpack

from jarvis.application.ask import AskQuestion
from jarvis.domain.agent_contract import AgentContext

if TYPE_CHECKING:
    from jarvis.application.approvals import ApprovalChoice, ApproveCallback
    from jarvis.application.ask import AskService
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.json_types import JSONValue
    from jarvis.domain.ports import InferencePort
    from jarvis.entrypoints.container import Container, EngineResource
    from jarvis.entrypoints.engine_choice import EngineChoice


class AskOptions(TypedDict, total=False):
    """How to answer one question: the keyword arguments of every ``Jarvis`` question method
    (``ask``, ``ask_full``, ``ask_stream``, ``aask``, ``aask_full``, ``aask_stream``).

    Every key is optional; a missing key or ``None`` falls back to the instance and the
    configuration, as on the command line.
    """

    agent: str | None
    """The agent to run (``simple``, ``orchestrator``, ``react``, ``rlm``...); default: the
    instance's ``agent``, else ``[agent] default``, else ``simple``."""
    model: str | None
    """The model; default: the instance's ``model`` (else ``[engine] model``), else the
    engine's first model."""
    temperature: float | None
    """Sampling temperature; default: ``[agent] temperature``."""
    max_tokens: int | None
    """The most tokens to generate per turn; default: ``[agent] max_tokens``."""
    system: str | None
    """Replaces the agent's system prompt."""
    tools: Sequence[str] | None
    """Tools for a tool-using agent, by name (``["calculator", "think"]``); default:
    ``[tools] enabled`` and the instance's own tools."""
    persona: str | None
    """A named persona (``<config dir>/personas/NAME/``), or ``"none"`` for no persona;
    default: ``[memory_files] persona_name``, else the default files."""
    context: str | AgentContext | None
    """Text the agent works on (the ``rlm`` agent keeps it in its REPL as ``context``, never
    in the prompt), or a whole ``AgentContext``."""
    agent_options: Mapping[str, JSONValue]
    """Settings of the chosen agent, as ``-O KEY=VALUE`` on the command line: for the
    ``orchestrator`` ``mode="structured"``, ``tool_choice="required"``, ``max_turns``...
    An option the agent does not take is a ``ConfigurationError``."""
    mounts: Sequence[str] | None
    """Host folders the ``sandboxed`` agent sees, ``PATH[:TARGET][:ro|rw]`` (read-only
    unless the mount allowlist allows writing), as ``--mount`` on the command line."""
    project_instructions: bool | None
    """Whether the ``AGENTS.md`` files of the working directory and its parents enter the
    prompt; default: ``[agent] project_instructions`` (true)."""
    approve: str | ApproveCallback | ApprovalChoice | None
    """Who approves tool calls the policy asks about (``[tools.approval]``): a callable
    (sync or async) that receives the ``ApprovalRequest`` and returns a bool or an
    ``ApprovalAnswer`` with a reason; or ``"auto"`` / ``"ask"`` / ``"deny"`` for every
    tool. Default (and ``"ask"``): nobody to ask, so such calls are denied, with a message
    the model reads."""


_OPTION_NAMES = AskOptions.__optional_keys__


@dataclass(eq=False, slots=True)
class _LoopState:
    """What one event loop uses: its ask service and what was built for it alone."""

    loop: asyncio.AbstractEventLoop
    building: asyncio.Lock
    service: AskService | None = None
    primary: bool = False
    """It runs on the container's own engines (closed with ``aclose_engines``)."""
    opened: EngineResource | None = None
    """The engine built for this loop only (a resource of its own, shut down on the loop)."""
    guard: AsyncGenerator[None, None] | None = None
    """Suspended until the loop shuts down (or :meth:`Runtime.aclose`), then closes it all."""
    closed: bool = False


class Runtime:
    """One container, configured once, for one CLI command or one ``Jarvis`` instance."""

    def __init__(
        self,
        container: Container,
        config: JarvisConfig,
        *,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.container = container
        self.config = config
        self.notice = notice
        self.choice: EngineChoice | None = None
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._primary: _LoopState | None = None
        self._mutex = threading.Lock()
        """Guards the loop table and the one-time configuration (loops may run in threads)."""

    async def service(self) -> AskService:
        """The ask use case of the running event loop, built on first use there."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None and state.service is not None:
            return state.service
        return await self._service_for(asyncio.get_running_loop())

    async def inference(self) -> InferencePort:
        """The engine the use case runs on (on the running event loop)."""
        return (await self.service()).inference

    async def _service_for(self, loop: asyncio.AbstractEventLoop) -> AskService:
        while True:
            with self._mutex:
                state = self._loops.get(loop)
                if state is None:
                    self._forget_closed_loops()
                    state = self._loops[loop] = _LoopState(loop, asyncio.Lock())
            async with state.building:
                if state.closed:  # closed while this call waited: start again
                    continue
                if state.service is None:
                    state.service = await self._build(state)
                    state.guard = self._closes_with_loop(state)
                    await anext(state.guard)
                return state.service

    async def _build(self, state: _LoopState) -> AskService:
        from jarvis.entrypoints.container import choose, loop_engine, resolved
        from jarvis.entrypoints.engine_choice import EngineChoice, choose_engine

        container = self.container
        provided = container.inference.last_overriding is not None
        if self.choice is None:
            if provided:
                engine = container.inference()
                choice = EngineChoice(
                    name=engine.engine_id, url=engine.base_url, reason="provided by the caller"
                )
            else:
                choice = await choose_engine(
                    self.config,
                    probe=container.ollama_probe(),
                    locate_model=container.model_locator(),
                )
            with self._mutex:
                if self.choice is None:  # another loop may have got here first
                    choose(container, choice)
                    self.choice = choice
                    if self.notice is not None:
                        where = f" at {choice.url}" if choice.url else ""
                        self.notice(f"engine: {choice.name}{where} ({choice.reason})")
        with self._mutex:
            if self._primary is None:
                self._primary = state
                state.primary = True
        if provided or state.primary:
            return await resolved(container.ask_service)
        own = loop_engine(container, self.choice.name)
        if own is None:  # the container's engine serves every loop
            return await resolved(container.ask_service)
        state.opened = own
        loops_engine: InferencePort = await resolved(own)
        return await resolved(container.ask_service, inference=loops_engine)

    async def _closes_with_loop(self, state: _LoopState) -> AsyncGenerator[None, None]:
        """Waits at ``yield`` until closed: by :meth:`aclose`, or by the loop shutting down
        (``loop.shutdown_asyncgens()``, which ``asyncio.run`` calls before closing it)."""
        try:
            yield
        finally:
            await self._close(state)

    async def _close(self, state: _LoopState) -> None:
        """Close what ``state``'s loop built (on that loop). Idempotent."""
        if state.closed:
            return
        state.closed = True
        with self._mutex:
            if self._loops.get(state.loop) is state:
                del self._loops[state.loop]
        state.service = None
        try:
            if state.opened is not None:
                pending = state.opened.shutdown()
                if pending is not None:
                    await pending
            if state.primary:
                from jarvis.entrypoints.container import aclose_engines

                await aclose_engines(self.container)
        finally:
            if state.primary:
                with self._mutex:
                    self._primary = None

    async def _shut(self, state: _LoopState) -> None:
        """Close ``state`` (on its loop) and finish its guard."""
        await self._close(state)
        guard, state.guard = state.guard, None
        if guard is not None:
            with contextlib.suppress(RuntimeError):  # being closed by the loop's shutdown
                await guard.aclose()

    def _forget_closed_loops(self) -> None:
        """Drop the states of loops closed without shutting their generators down (their
        connections went with them). Called with the mutex held."""
        for loop in [loop for loop in self._loops if loop.is_closed()]:
            state = self._loops.pop(loop)
            state.closed = True
            state.service = None
            guard, state.guard = state.guard, None
            if guard is not None:
                # finish it here (its ``finally`` sees ``closed`` and returns at once): left
                # to the garbage collector, it would be handed to its closed loop
                with contextlib.suppress(StopIteration, RuntimeError):
                    guard.aclose().send(None)
            if self._primary is state:
                from jarvis.entrypoints.container import forget_engines

                forget_engines(self.container)  # their pools belong to the closed loop
                self._primary = None

    async def aclose(self) -> None:
        """Close the engines this runtime built: the running loop's at once, other loops'
        on their own loops (scheduled there; a closed loop took its connections with it).
        Idempotent; a later question builds them again."""
        self.close_soon(skip=self._loops.get(asyncio.get_running_loop()))
        await self.aclose_loop()

    async def aclose_loop(self) -> None:
        """Close the engines of the running loop only."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None:
            await self._shut(state)

    def close_soon(self, *, skip: _LoopState | None = None) -> None:
        """Schedule the closing of every loop's engines on that loop, without waiting."""
        with self._mutex:
            self._forget_closed_loops()
            states = [s for s in self._loops.values() if s is not skip]
        for state in states:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._shut(state), state.loop)

    def question(self, question: str, **options: Unpack[AskOptions]) -> AskQuestion:
        """The command for one question and its :class:`AskOptions` (``None`` is left for the
        ask use case to fill from the ``[agent]`` settings). An option that is not one of
        them is a ``TypeError``."""
        unknown = options.keys() - _OPTION_NAMES
        if unknown:
            raise TypeError(
                f"unexpected keyword argument {min(unknown)!r}; the options are "
                + ", ".join(sorted(_OPTION_NAMES))
            )
        context = options.get("context")
        if isinstance(context, str):
            context = AgentContext(metadata={"context": context})
        return AskQuestion(
            question=question,
            agent=options.get("agent"),
            model=options.get("model"),
            temperature=options.get("temperature"),
            max_tokens=options.get("max_tokens"),
            system_prompt=options.get("system"),
            tools=tuple(options.get("tools") or ()),
            persona=options.get("persona"),
            context=context,
            agent_options=dict(options.get("agent_options") or {}),
            mounts=tuple(options.get("mounts") or ()),
            project_instructions=options.get("project_instructions"),
            approval=approval_choice(options.get("approve")),
        )


def approval_choice(approve: str | ApproveCallback | ApprovalChoice | None) -> ApprovalChoice:
    """The approvals of a question from its ``approve`` option (see :class:`AskOptions`)."""
    from jarvis.application.approvals import (
        ApprovalChoice,
        CallbackApprovals,
        DenyingApprovals,
    )
    from jarvis.domain.approvals import APPROVAL_MODES

    if isinstance(approve, ApprovalChoice):
        return approve
    nobody = DenyingApprovals("no approve= callback to ask")
    if approve is None:
        return ApprovalChoice(port=nobody)
    if isinstance(approve, str):
        for mode in APPROVAL_MODES:
            if approve == mode:
                return ApprovalChoice(port=nobody, mode=mode, mode_source="approve=")
        from jarvis.domain.errors import ConfigurationError

        raise ConfigurationError(
            f"Unknown approve={approve!r}.",
            hint="Pass 'auto', 'ask', 'deny' or a callable that receives the call.",
        )
    if not callable(approve):
        raise TypeError("approve= takes 'auto', 'ask', 'deny' or a callable")
    return ApprovalChoice(port=CallbackApprovals(approve))
