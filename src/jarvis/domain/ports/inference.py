"""The inference engine and the sentence-embedding model the agents call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest


class InferencePort(Protocol):
    """An inference engine (Ollama, vLLM, an OpenAI-compatible server, an embedded model)."""

    @property
    def engine_id(self) -> str:
        """Short name of the engine kind: ``ollama``, ``vllm``, ``openai``, ``llamacpp``..."""
        ...

    @property
    def base_url(self) -> str:
        """Where the engine is reached ("" for an in-process engine); used in messages."""
        ...

    async def generate(self, request: InferenceRequest) -> Completion:
        """Run one generation to the end.

        Raises a subclass of :class:`~jarvis.domain.errors.InferenceError`:
        ``EngineUnavailableError`` when the engine cannot be reached (after bounded retries),
        ``ModelNotFoundError`` (listing the available models), ``ContextTooLongError``,
        ``ToolsNotSupportedError`` when tools were offered to a model that cannot take them,
        ``EngineProtocolError`` when the answer cannot be understood.
        """
        ...

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        """Stream one generation: content chunks, then exactly one final chunk.

        The final chunk has ``finish_reason`` set and carries every tool call, assembled
        and complete, plus the usage when the engine reports it. Raises the same errors as
        :meth:`generate`, before the first chunk when the request is refused.
        """
        ...

    async def list_models(self) -> list[str]:
        """The model names the engine can serve."""
        ...

    async def health(self) -> bool:
        """True when the engine answers; never raises."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes. Idempotent."""
        ...


class EmbeddingPort(Protocol):
    """A sentence-embedding model: texts to unit-length vectors whose dot product is their
    cosine similarity."""

    @property
    def model_id(self) -> str:
        """The model's name (e.g. ``all-MiniLM-L6-v2``)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One vector per text, in order; every vector has the same length."""
        ...
