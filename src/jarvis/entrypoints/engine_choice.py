"""Which engine a run uses: ``[engine] name``, else (``auto``) a local Ollama, else the
embedded model.

The two things the choice asks the machine, whether an Ollama answers and where the
embedded model's file is, are parameters (:data:`OllamaProbe`, :data:`ModelLocator`): the
container provides the real ones (``ollama_probe``, ``model_locator``), tests pass their
own, so the choice is tested the same on a machine with or without the model package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jarvis.application.engine_names import ENGINE_URL_KEYS
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig

OLLAMA_PROBE_TIMEOUT = 0.3
"""Seconds ``auto`` waits for a local Ollama before using the embedded model."""

OllamaProbe = Callable[[str, float], Awaitable[bool]]
"""``probe(host, timeout)``: whether an Ollama answers at ``host`` within ``timeout``."""

ModelLocator = Callable[[], str]
"""The embedded model's default file; raises ``ConfigurationError`` (its hint says how to
install it) when there is none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineChoice:
    """Which engine a run uses, where it is, and why it was chosen."""

    name: str
    url: str
    reason: str


def engine_location(config: JarvisConfig, name: str, *, locate_model: ModelLocator) -> str:
    """The URL of engine ``name``; for the embedded engine its model file (the configured
    one, else :data:`ModelLocator`'s); ``""`` for ``auto``."""
    engine = config.engine
    if name == "llamacpp":
        return engine.llamacpp.model_path or locate_model()
    key = ENGINE_URL_KEYS.get(name)
    if key is None:
        return ""
    url: str = getattr(getattr(engine, name), key)
    return url


async def choose_engine(
    config: JarvisConfig, *, probe: OllamaProbe, locate_model: ModelLocator
) -> EngineChoice:
    """Resolve ``auto``: the configured engine, else a reachable Ollama, else the embedded
    one. An engine named explicitly is never replaced by another."""
    name = config.engine.name
    if name != "auto":
        return EngineChoice(
            name=name,
            url=engine_location(config, name, locate_model=locate_model),
            reason="chosen by --engine or [engine] name",
        )
    host = config.engine.ollama.host
    if await probe(host, OLLAMA_PROBE_TIMEOUT):
        return EngineChoice(
            name="ollama", url=host, reason=f"auto: a local Ollama answered at {host}"
        )
    try:
        model_file = engine_location(config, "llamacpp", locate_model=locate_model)
    except ConfigurationError as exc:
        raise EngineUnavailableError(
            f"No engine available: no Ollama answers at {host} and the embedded model "
            "is not installed.",
            engine="auto",
            url=host,
            hint="Start Ollama (`ollama serve`), choose an engine with --engine and "
            "--base-url, or install the embedded model: " + exc.hint,
        ) from exc
    return EngineChoice(
        name="llamacpp",
        url=model_file,
        reason=f"auto: no engine configured and no Ollama answering at {host}; "
        "using the embedded model",
    )
