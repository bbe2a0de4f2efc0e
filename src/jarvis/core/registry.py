"""``from jarvis.core.registry import AgentRegistry``."""

from jarvis.compat.registry import AgentRegistry

__all__ = ["AgentRegistry"]
