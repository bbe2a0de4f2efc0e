"""vLLM: the OpenAI-compatible adapter plus what vLLM adds.

* ``health`` asks vLLM's own ``GET /health`` (at the server root, outside ``/v1``), which
  answers only once the model is loaded; servers without it fall back to ``GET /models``.
* Structured output: first the standard ``response_format`` ``json_schema`` (what vLLM has
  accepted since 0.6 and what current releases document). A server that refuses that shape
  is asked again with the ``json_object`` + inline ``schema`` form (llama.cpp's server,
  often run behind the same URL), then with vLLM's older ``guided_json`` extra field (vLLM
  0.5, whose strict request models refuse the inline form, so a refusal always moves on
  and the schema is never silently ignored). The form that worked is remembered.
* vLLM's extra sampling options (``top_k``, ``min_p``, ``repetition_penalty``,
  ``min_tokens``) are forwarded from ``InferenceRequest.options``.
* vLLM stops at ``max_tokens`` whether tools are offered or not, so a whole request with
  tools is sent whole (``honours_max_tokens=False`` reads it as a stream instead).
"""

from __future__ import annotations

import httpx

from jarvis.adapters.inference._openai_wire import OPENAI_OPTION_KEYS
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.openai_compat import (
    HEALTH_TIMEOUT,
    OpenAICompatibleEngine,
    StructuredDialect,
)

_VLLM_HINT = (
    "Start vLLM with `vllm serve <model>` (it listens on port 8000), "
    "or point --base-url / VLLM_HOST at a running server."
)


class VllmEngine(OpenAICompatibleEngine):
    """A vLLM server (``engine_id`` ``vllm``)."""

    structured_dialects: tuple[StructuredDialect, ...] = (
        "json_schema",
        "inline_schema",
        "guided_json",
    )
    option_keys = OPENAI_OPTION_KEYS | {"top_k", "min_p", "repetition_penalty", "min_tokens"}
    honours_max_tokens_by_default = True

    def __init__(
        self,
        base_url: str = "http://localhost:8000/v1",
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        wire: EngineTransport = "httptools",
        backoff: float = 0.5,
        backoff_cap: float = 8.0,
        honours_max_tokens: bool | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            engine_id="vllm",
            timeout=timeout,
            max_retries=max_retries,
            transport=transport,
            wire=wire,
            backoff=backoff,
            backoff_cap=backoff_cap,
            start_hint=_VLLM_HINT,
            honours_max_tokens=honours_max_tokens,
        )

    @property
    def root_url(self) -> str:
        """The server root: the base URL without its ``/v1`` API prefix."""
        base = self.base_url
        return base[: -len("/v1")] if base.endswith("/v1") else base

    async def health(self) -> bool:
        if await self._http.probe(self.root_url + "/health", timeout=HEALTH_TIMEOUT):
            return True
        return await super().health()
