"""``from jarvis.agents.simple import SimpleAgent``."""

from jarvis.compat.agents import SimpleAgent

__all__ = ["SimpleAgent"]
