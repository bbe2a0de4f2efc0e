"""``from jarvis.core.types import AgentContext, AgentResult, ToolResult, Message``."""

from jarvis.domain.agent_contract import AgentContext, AgentResult
from jarvis.domain.messages import Message, Role
from jarvis.domain.tools import ToolResult

__all__ = ["AgentContext", "AgentResult", "Message", "Role", "ToolResult"]
