"""The ``claude_code`` runtime: the Claude Agent SDK in Node, over ``claude_code_runner/``."""

from jarvis.adapters.claude_agent_sdk.runtime import ClaudeCodeRuntime, LoopbackEndpoint

__all__ = ["ClaudeCodeRuntime", "LoopbackEndpoint"]
