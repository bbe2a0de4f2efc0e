"""``from jarvis.agents.rlm import RLMAgent``."""

from jarvis.compat.agents import RLMAgent

__all__ = ["RLMAgent"]
