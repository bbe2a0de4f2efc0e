"""An inference port over another engine, for the wrappers that change part of what it
does (the typed answer's engine shapes requests; OpenJarvis's engine picks one per event
loop): everything a wrapper does not change passes through, written once here."""

from __future__ import annotations

from collections.abc import AsyncIterator

from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.ports.inference import InferencePort


class WrappedEngine:
    """The inference port of :meth:`wrapped`, unchanged; a subclass overrides what it
    changes."""

    def wrapped(self) -> InferencePort:
        raise NotImplementedError

    @property
    def engine_id(self) -> str:
        return self.wrapped().engine_id

    @property
    def base_url(self) -> str:
        return self.wrapped().base_url

    async def generate(self, request: InferenceRequest) -> Completion:
        return await self.wrapped().generate(request)

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        return self.wrapped().stream(request)

    async def list_models(self) -> list[str]:
        return await self.wrapped().list_models()

    async def health(self) -> bool:
        return await self.wrapped().health()

    async def aclose(self) -> None:
        await self.wrapped().aclose()
