"""``from jarvis.agents.orchestrator import OrchestratorAgent``."""

from jarvis.compat.agents import OrchestratorAgent

__all__ = ["OrchestratorAgent"]
