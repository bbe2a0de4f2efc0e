"""``from jarvis.agents.react import ReActAgent``: OpenJarvis's older name of
``NativeReActAgent`` (registry key ``native_react``, alias ``react``)."""

from jarvis.compat.agents import NativeReActAgent, ReActAgent

__all__ = ["NativeReActAgent", "ReActAgent"]
