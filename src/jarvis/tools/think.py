"""``from jarvis.tools.think import ThinkTool``."""

from jarvis.compat.tools import ThinkTool

__all__ = ["ThinkTool"]
