"""``from jarvis.agents._stubs import BaseAgent, AgentContext, AgentResult``."""

from jarvis.compat.agents import BaseAgent
from jarvis.domain.agent_contract import AgentContext, AgentResult

__all__ = ["AgentContext", "AgentResult", "BaseAgent"]
