"""Agents and tools from other packages (plug-ins), found only when asked for.

A :class:`PluginSource` names the plug-in agents and tools it knows without loading them,
and loads one by name. The agent registry and the tool catalogue consult it only for a name
they do not have themselves, and to list everything (``jarvis agents``, ``jarvis tools``),
so a question to a built-in agent with built-in tools never looks for plug-ins.
"""

from __future__ import annotations

from typing import Protocol

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.ports import ToolPort


class PluginError(ConfigurationError):
    """A plug-in that could not be loaded; ``plugin`` names it (exit code 2 when it was
    asked for, a notice when only listed)."""

    def __init__(self, plugin: str, reason: str, *, hint: str = "") -> None:
        super().__init__(
            f"Plug-in {plugin} failed to load: {reason}",
            hint=hint or "Fix or uninstall the package, or remove it from [plugins] modules.",
        )
        self.plugin = plugin
        self.reason = reason


class PluginSource(Protocol):
    """The plug-ins: names without loading anything, a plug-in loaded by name."""

    def agent_names(self) -> list[str]: ...

    def load_agent(self, name: str) -> type[BaseAgent]:
        """The agent class; ``PluginError`` naming the plug-in when it cannot be loaded."""
        ...

    def tool_names(self) -> list[str]: ...

    def load_tool(self, name: str) -> ToolPort:
        """The tool; ``PluginError`` naming the plug-in when it cannot be loaded."""
        ...

    def failures(self) -> list[PluginError]:
        """The plug-in modules that could not even be imported to list their names."""
        ...
