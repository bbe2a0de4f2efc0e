"""``from jarvis.agents.native_openhands import NativeOpenHandsAgent``."""

from jarvis.compat.agents import NativeOpenHandsAgent

__all__ = ["NativeOpenHandsAgent"]
