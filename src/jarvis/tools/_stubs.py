"""``from jarvis.tools._stubs import BaseTool, ToolExecutor, ToolSpec, ToolResult``."""

from jarvis.compat.tool_stubs import BaseTool, ToolExecutor
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.tools.specs import ToolResult, ToolSpec

__all__ = ["BaseTool", "ToolCall", "ToolExecutor", "ToolResult", "ToolSpec"]
