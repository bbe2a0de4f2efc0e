"""``from jarvis.agents.sandboxed import SandboxedAgent``."""

from jarvis.compat.sandbox import SandboxedAgent

__all__ = ["SandboxedAgent"]
