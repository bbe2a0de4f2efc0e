"""``from jarvis.agents._stubs import BaseAgent, ToolUsingAgent, AgentContext, AgentResult``."""

from jarvis.compat.agents import BaseAgent, ToolUsingAgent
from jarvis.domain.run.contract import AgentContext, AgentResult

__all__ = ["AgentContext", "AgentResult", "BaseAgent", "ToolUsingAgent"]
