"""``from jarvis.engine.ollama import OllamaEngine``."""

from jarvis.compat.engines import OllamaEngine

__all__ = ["OllamaEngine"]
