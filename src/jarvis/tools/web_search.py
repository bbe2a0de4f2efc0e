"""``from jarvis.tools.web_search import WebSearchTool``."""

from jarvis.compat.tools import WebSearchTool

__all__ = ["WebSearchTool"]
