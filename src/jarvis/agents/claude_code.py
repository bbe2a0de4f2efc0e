"""``from jarvis.agents.claude_code import ClaudeCodeAgent``."""

from jarvis.compat.agents import ClaudeCodeAgent

__all__ = ["ClaudeCodeAgent"]
