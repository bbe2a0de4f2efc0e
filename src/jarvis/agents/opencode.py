"""``from jarvis.agents.opencode import OpenCodeAgent``."""

from jarvis.compat.agents import OpenCodeAgent

__all__ = ["OpenCodeAgent"]
