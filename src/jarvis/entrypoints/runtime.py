"""What the CLI and the SDK share: a configured container, its engine, and the ask use case.

A :class:`Runtime` wraps one container. On first use it resolves the engine choice (unless a
test or an embedding app has overridden ``container.inference``), loads the configuration
into the container and resolves the :class:`~jarvis.application.ask.AskService` once, so
that every question of a CLI command or of a ``Jarvis`` instance reuses the same engine
and its connection pool. :meth:`Runtime.aclose` closes the engines it built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack

from jarvis.application.ask import AskQuestion
from jarvis.domain.agent import AgentContext

if TYPE_CHECKING:
    from jarvis.application.ask import AskService
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.json_types import JSONValue
    from jarvis.domain.ports import InferencePort
    from jarvis.entrypoints.container import Container, EngineChoice


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


_OPTION_NAMES = AskOptions.__optional_keys__


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
        self._service: AskService | None = None
        self._lock: asyncio.Lock | None = None

    async def service(self) -> AskService:
        """The ask use case, built on first use (engine chosen, config loaded)."""
        if self._service is not None:
            return self._service
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._service is None:
                self._service = await self._build()
        return self._service

    async def inference(self) -> InferencePort:
        """The engine the use case runs on."""
        return (await self.service()).inference

    async def _build(self) -> AskService:
        from jarvis.entrypoints.container import EngineChoice, choose_engine, configure

        container = self.container
        if container.inference.last_overriding is not None:
            configure(container, self.config)
            service = container.ask_service()
            engine = service.inference
            self.choice = EngineChoice(
                name=engine.engine_id, url=engine.base_url, reason="provided by the caller"
            )
        else:
            self.choice = await choose_engine(self.config)
            configure(container, self.config, engine=self.choice.name)
            service = container.ask_service()
        if self.notice is not None:
            where = f" at {self.choice.url}" if self.choice.url else ""
            self.notice(f"engine: {self.choice.name}{where} ({self.choice.reason})")
        return service

    def question(self, question: str, **options: Unpack[AskOptions]) -> AskQuestion:
        """The command for one question and its :class:`AskOptions`; ``None`` falls back to
        the ``[agent]`` settings. An option that is not one of them is a ``TypeError``."""
        unknown = options.keys() - _OPTION_NAMES
        if unknown:
            raise TypeError(
                f"unexpected keyword argument {min(unknown)!r}; the options are "
                + ", ".join(sorted(_OPTION_NAMES))
            )
        settings = self.config.agent
        temperature = options.get("temperature")
        max_tokens = options.get("max_tokens")
        context = options.get("context")
        if isinstance(context, str):
            context = AgentContext(metadata={"context": context})
        return AskQuestion(
            question=question,
            agent=options.get("agent"),
            model=options.get("model"),
            temperature=settings.temperature if temperature is None else temperature,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            system_prompt=options.get("system"),
            tools=tuple(options.get("tools") or ()),
            persona=options.get("persona"),
            context=context,
            agent_options=dict(options.get("agent_options") or {}),
        )

    async def aclose(self) -> None:
        """Close every engine this runtime built. Idempotent."""
        from jarvis.entrypoints.container import aclose_engines

        self._service = None
        await aclose_engines(self.container)
