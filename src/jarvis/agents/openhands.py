"""``from jarvis.agents.openhands import OpenHandsAgent``."""

from jarvis.compat.agents import OpenHandsAgent

__all__ = ["OpenHandsAgent"]
