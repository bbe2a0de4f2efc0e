"""``from jarvis.agents.operative import OperativeAgent``."""

from jarvis.compat.agents import OperativeAgent

__all__ = ["OperativeAgent"]
