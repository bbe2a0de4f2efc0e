"""What the CLI and the SDK share: a configured container, its engine, and the ask use case.

A :class:`Runtime` wraps one container. On first use it resolves the engine choice (unless a
test or an embedding app has overridden ``container.inference``), loads the configuration
into the container and resolves the :class:`~jarvis.application.ask.AskService` once, so
that every question of a CLI command or of a ``Jarvis`` instance reuses the same engine
and its connection pool. :meth:`Runtime.aclose` closes the engines it built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from jarvis.application.ask import AskQuestion

if TYPE_CHECKING:
    from jarvis.application.ask import AskService
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.ports import InferencePort
    from jarvis.entrypoints.container import Container, EngineChoice


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

    def question(
        self,
        question: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        system: str | None = None,
        tools: Sequence[str] | None = None,
        persona: str | None = None,
    ) -> AskQuestion:
        """The command for one question; ``None`` falls back to the ``[agent]`` settings."""
        settings = self.config.agent
        return AskQuestion(
            question=question,
            agent=agent,
            model=model,
            temperature=settings.temperature if temperature is None else temperature,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            system_prompt=system,
            tools=tuple(tools or ()),
            persona=persona,
        )

    async def aclose(self) -> None:
        """Close every engine this runtime built. Idempotent."""
        from jarvis.entrypoints.container import aclose_engines

        self._service = None
        await aclose_engines(self.container)
