"""``from jarvis.agents.monitor_operative import MonitorOperativeAgent``."""

from jarvis.compat.agents import MonitorOperativeAgent

__all__ = ["MonitorOperativeAgent"]
