"""An engine that makes no inference, for agents that are built but never infer.

An agent needs an engine to be built; some are built without one to ask: OpenJarvis's
agents given ``engine=None`` (the external runtimes bring their own), and the agent an
operator's options are checked on. Asked anyway, such an engine says why it cannot
answer (:meth:`NoInference.refusal`); it lists no models and is never healthy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest


class NoInference:
    """The inference port, refusing every request with :meth:`refusal`."""

    engine_id = "none"
    base_url = ""

    def refusal(self) -> Exception:
        """What a request raises: the subclass says why there is no engine."""
        return RuntimeError("this engine makes no inference")

    async def generate(self, request: InferenceRequest) -> Completion:
        raise self.refusal()

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        raise self.refusal()

    async def list_models(self) -> list[str]:
        return []

    async def health(self) -> bool:
        return False

    async def aclose(self) -> None:
        return None
