"""``from jarvis.agents.native_react import NativeReActAgent``."""

from jarvis.compat.agents import NativeReActAgent

__all__ = ["NativeReActAgent"]
