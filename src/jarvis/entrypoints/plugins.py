"""The plug-ins: the ``jarvis.agents`` / ``jarvis.tools`` entry points of installed
packages, and the modules named in ``[plugins] modules``.

An entry point's name is the agent key or tool name; its object is an agent class (a
subclass of jarvis's ``BaseAgent``, OpenJarvis-style ones included), or a tool (an object
with ``spec`` and ``execute``, a class of them, or a typed function). A module of
``[plugins] modules`` offers ``AGENTS`` (a mapping of key to agent class) and/or ``TOOLS``
(a sequence of tools or typed functions).

Nothing is looked for until a name that no built-in has is asked for, or everything is
listed: then the entry points are read (their names only) and the modules imported. A
plug-in that cannot be imported or gives the wrong kind of object is a
:class:`~jarvis.application.plugins.PluginError` naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from jarvis.application.plugins import PluginError
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.ports import ToolPort

AGENT_GROUP = "jarvis.agents"
TOOL_GROUP = "jarvis.tools"


@dataclass(slots=True)
class _Found:
    agents: dict[str, tuple[str, Callable[[], object]]] = field(default_factory=dict)
    """Key: (what it is, for messages; loader)."""
    tools: dict[str, tuple[str, Callable[[], object]]] = field(default_factory=dict)
    failures: list[PluginError] = field(default_factory=list)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return masked_prefix(f"{type(exc).__name__}: {text}", 500) if text else type(exc).__name__


class InstalledPlugins:
    """:class:`~jarvis.application.plugins.PluginSource` over entry points and modules."""

    def __init__(self, modules: Sequence[str] = ()) -> None:
        self.modules = tuple(modules)
        self._found: _Found | None = None

    def _scan(self) -> _Found:
        if self._found is not None:
            return self._found
        from importlib.metadata import entry_points

        found = _Found()
        for group, table in ((AGENT_GROUP, found.agents), (TOOL_GROUP, found.tools)):
            for point in entry_points(group=group):
                where = f"{point.name!r} (entry point {point.value}"
                if point.dist is not None:
                    where += f" of {point.dist.name} {point.dist.version}"
                table.setdefault(point.name, (where + ")", point.load))
        for module in self.modules:
            self._scan_module(module, found)
        self._found = found
        return found

    def _scan_module(self, name: str, found: _Found) -> None:
        where = f"module {name!r} ([plugins] modules)"
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            found.failures.append(PluginError(where, _reason(exc)))
            return
        agents = getattr(module, "AGENTS", {})
        tools = getattr(module, "TOOLS", ())
        if not isinstance(agents, Mapping) or not isinstance(tools, Sequence):
            found.failures.append(
                PluginError(where, "AGENTS must be a mapping and TOOLS a sequence.")
            )
            return
        for key, agent in agents.items():
            found.agents.setdefault(str(key), (f"{key!r} of {where}", _constant(agent)))
        for tool in tools:
            try:
                port = _as_tool(tool)
            except PluginError as exc:
                found.failures.append(PluginError(where, exc.reason))
                continue
            label = f"{port.spec.name!r} of {where}"
            found.tools.setdefault(port.spec.name, (label, _constant(port)))

    def agent_names(self) -> list[str]:
        return sorted(self._scan().agents)

    def tool_names(self) -> list[str]:
        return sorted(self._scan().tools)

    def failures(self) -> list[PluginError]:
        return list(self._scan().failures)

    def load_agent(self, name: str) -> type[BaseAgent]:
        where, load = self._scan().agents[name]
        obj = _loaded(where, load)
        if not (isinstance(obj, type) and issubclass(obj, BaseAgent)):
            raise PluginError(f"agent {where}", f"{obj!r} is not an agent class.")
        return obj

    def load_tool(self, name: str) -> ToolPort:
        where, load = self._scan().tools[name]
        try:
            return _as_tool(_loaded(where, load))
        except PluginError as exc:
            raise PluginError(f"tool {where}", exc.reason) from None


def _constant(value: object) -> Callable[[], object]:
    return lambda: value


def _loaded(where: str, load: Callable[[], object]) -> object:
    try:
        return load()
    except Exception as exc:
        raise PluginError(where, _reason(exc)) from None


def _as_tool(obj: object) -> ToolPort:
    """A tool object, one made by a tool class, or a typed function turned into one."""
    from jarvis.application.tools.function_tool import as_tool

    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise PluginError("tool", f"its class could not be built ({_reason(exc)}).") from None
    if hasattr(obj, "spec") and hasattr(obj, "execute"):
        return as_tool(obj)
    if callable(obj):
        try:
            return as_tool(obj)
        except Exception as exc:
            raise PluginError("tool", f"not a tool ({_reason(exc)}).") from None
    raise PluginError("tool", f"{obj!r} is neither a tool nor a function.")
