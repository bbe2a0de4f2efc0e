"""``from jarvis.core.types import AgentContext, AgentResult, ToolCall, ToolResult, Message``."""

from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.tools.specs import ToolResult

__all__ = ["AgentContext", "AgentResult", "Message", "Role", "ToolCall", "ToolResult"]
