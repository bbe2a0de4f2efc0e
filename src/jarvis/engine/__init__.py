"""``from jarvis.engine import get_engine, OllamaEngine, VLLMEngine...`` (OpenJarvis's
``openjarvis.engine``; see :mod:`jarvis.compat.engines`)."""

from jarvis.compat.engines import (
    OllamaEngine,
    OpenAICompatEngine,
    VLLMEngine,
    get_engine,
)

__all__ = ["OllamaEngine", "OpenAICompatEngine", "VLLMEngine", "get_engine"]
