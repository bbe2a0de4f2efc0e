"""OpenJarvis's engine classes (``OllamaEngine(host=..., timeout=...)``, ``VLLMEngine``...,
``get_engine``) over jarvis's engines.

Each class is an :class:`~jarvis.domain.ports.InferencePort` that delegates to the jarvis
engine it builds, so it can be handed to any agent, jarvis's or OpenJarvis-style. OpenJarvis
hosts are written without ``/v1`` (``http://localhost:8000``); it is appended here, as
OpenJarvis appends it to every request (uzu serves without it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import ClassVar

from jarvis.application.config import (
    EngineSettings,
    JarvisConfig,
    OllamaSettings,
    OpenAISettings,
    VllmSettings,
)
from jarvis.domain.loop.wrapped_engine import WrappedEngine
from jarvis.domain.ports import InferencePort


class CompatEngine(WrappedEngine):
    """An :class:`InferencePort` that delegates every call to a jarvis engine.

    OpenJarvis's agents are called synchronously (``agent.run(...)``), each call on an event
    loop of its own, while a jarvis engine's connection pool belongs to the loop that
    opened it: the engine is built by ``build`` once per event loop it is used on.
    """

    def __init__(self, build: Callable[[], InferencePort]) -> None:
        self._build = build
        self._first = build()  # built now, so a bad setting is an error at construction
        self._engines: dict[int, tuple[asyncio.AbstractEventLoop, InferencePort]] = {}
        self._used = False
        """Whether the first engine went to a loop (later loops get engines of their own)."""

    @property
    def inner(self) -> InferencePort:
        """The engine of the running loop (the first one built outside any loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._first
        for key, (seen, _) in list(self._engines.items()):
            if seen.is_closed():
                del self._engines[key]
        found = self._engines.get(id(loop))
        if found is None or found[0] is not loop:
            engine = self._first if not self._engines and not self._used else self._build()
            self._used = True
            found = self._engines[id(loop)] = (loop, engine)
        return found[1]

    def wrapped(self) -> InferencePort:
        """The engine of the running loop (closing closes that one)."""
        return self.inner


def _built(name: str, config: JarvisConfig) -> InferencePort:
    from jarvis.entrypoints.composition.engines import build_engine

    return build_engine(name, config)


class OllamaEngine(CompatEngine):
    """``OllamaEngine(host=None, *, timeout=...)``: ``host`` else ``$OLLAMA_HOST`` else
    ``http://localhost:11434``."""

    def __init__(
        self, host: str | None = None, *, timeout: float = 1800.0, num_ctx: int | None = None
    ) -> None:
        from jarvis.entrypoints.settings import check_url, normalize_ollama_host

        chosen = host or os.environ.get("OLLAMA_HOST", "").strip() or "http://localhost:11434"
        url = check_url(normalize_ollama_host(chosen), "OllamaEngine host")
        config = JarvisConfig(
            engine=EngineSettings(
                name="ollama", timeout=timeout, ollama=OllamaSettings(host=url, num_ctx=num_ctx)
            )
        )
        super().__init__(lambda: _built("ollama", config))


class OpenAICompatEngine(CompatEngine):
    """An OpenAI-compatible server at ``host`` (OpenJarvis's ``_OpenAICompatibleEngine``);
    subclasses name OpenJarvis's engines with their default hosts."""

    default_host: ClassVar[str] = "http://localhost:8000"
    api_prefix: ClassVar[str] = "/v1"
    env_prefix: ClassVar[str] = "OPENAI_COMPAT"

    def __init__(
        self, host: str | None = None, *, api_key: str | None = None, timeout: float = 600.0
    ) -> None:
        from jarvis.entrypoints.settings import check_url

        chosen = host or os.environ.get(f"{self.env_prefix}_HOST", "") or self.default_host
        base = chosen.strip().rstrip("/")
        if "://" not in base:
            base = "http://" + base
        if self.api_prefix and not base.endswith(self.api_prefix):
            base += self.api_prefix
        url = check_url(base, f"{type(self).__name__} host")
        key = api_key or os.environ.get(f"{self.env_prefix}_API_KEY") or None
        if self.env_prefix == "VLLM":
            engine = EngineSettings(
                name="vllm", timeout=timeout, vllm=VllmSettings(base_url=url, api_key=key)
            )
            vllm = JarvisConfig(engine=engine)
            super().__init__(lambda: _built("vllm", vllm))
            return
        engine = EngineSettings(
            name="openai", timeout=timeout, openai=OpenAISettings(base_url=url, api_key=key)
        )
        openai = JarvisConfig(engine=engine)
        super().__init__(lambda: _built("openai", openai))


class VLLMEngine(OpenAICompatEngine):
    default_host = "http://localhost:8000"
    env_prefix = "VLLM"


class SGLangEngine(OpenAICompatEngine):
    default_host = "http://localhost:30000"
    env_prefix = "SGLANG"


class LlamaCppEngine(OpenAICompatEngine):
    """A llama.cpp *server* (OpenJarvis's ``llamacpp``); jarvis's embedded engine is
    ``--engine llamacpp``."""

    default_host = "http://localhost:8080"
    env_prefix = "LLAMACPP"


class MLXEngine(OpenAICompatEngine):
    default_host = "http://localhost:8080"
    env_prefix = "MLX"


class LMStudioEngine(OpenAICompatEngine):
    default_host = "http://localhost:1234"
    env_prefix = "LMSTUDIO"


class ExoEngine(OpenAICompatEngine):
    default_host = "http://localhost:52415"
    env_prefix = "EXO"


class NexaEngine(OpenAICompatEngine):
    default_host = "http://localhost:18181"
    env_prefix = "NEXA"


class UzuEngine(OpenAICompatEngine):
    default_host = "http://localhost:8000"
    api_prefix = ""
    env_prefix = "UZU"


class AppleFmEngine(OpenAICompatEngine):
    default_host = "http://localhost:8079"
    env_prefix = "APPLE_FM"


class LemonadeEngine(OpenAICompatEngine):
    default_host = "http://localhost:13305"
    env_prefix = "LEMONADE"


OPENAI_COMPATIBLE: dict[str, type[OpenAICompatEngine]] = {
    "vllm": VLLMEngine,
    "sglang": SGLangEngine,
    "llamacpp": LlamaCppEngine,
    "mlx": MLXEngine,
    "lmstudio": LMStudioEngine,
    "exo": ExoEngine,
    "nexa": NexaEngine,
    "uzu": UzuEngine,
    "apple_fm": AppleFmEngine,
    "lemonade": LemonadeEngine,
    "openai": OpenAICompatEngine,
}
"""OpenJarvis's engine keys and their classes (``openai``: a generic compatible server)."""


def get_engine(
    config: JarvisConfig | None = None,
    engine_key: str | None = None,
    model: str | None = None,
) -> tuple[str, InferencePort] | None:
    """``(key, engine)`` for ``engine_key`` (else the configuration's engine), or ``None``
    when it does not answer (OpenJarvis's ``get_engine``; ``model`` is accepted for its
    signature: jarvis's engines serve whatever model they list)."""
    from jarvis.entrypoints.settings import load_config

    settings = config or load_config()
    key = engine_key or settings.engine.name
    if key == "auto":
        key = "ollama"
    if key == "ollama":
        engine: InferencePort = _built("ollama", settings)
    elif key in ("vllm", "openai"):
        engine = _built(key, settings)
    elif key in OPENAI_COMPATIBLE:
        engine = OPENAI_COMPATIBLE[key]()
    elif key == "llamacpp_embedded":
        engine = _built("llamacpp", settings)
    else:
        return None

    async def answers() -> bool:
        try:
            return await engine.health()
        finally:
            await engine.aclose()  # its pool belongs to this loop; a later call opens one

    return (key, engine) if asyncio.run(answers()) else None
