"""The names a configuration file gives that only jarvis's registries can check: the
default agent (``[agent] default``, OpenJarvis's ``default_agent``) and the default tools
(``[tools] enabled``).

The schema cannot check them: agents and tools come from plug-ins and MCP servers too. So
``jarvis config check`` checks them against the agent registry and the tool catalogue (a
file that every run would refuse is not "valid"), and ``jarvis ask`` says where an unknown
default agent came from. MCP servers are never started here: ``SERVER`` and
``SERVER.TOOL`` are accepted when ``SERVER`` is configured, and a bare name no built-in
tool or plug-in has is only a warning when MCP servers are configured (one of them may
offer a tool of that name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jarvis.application.dotted_keys import get_key
from jarvis.application.plugins import PluginError
from jarvis.domain.errors import ConfigurationError, UnknownAgentError, shown

if TYPE_CHECKING:
    from jarvis.application.registry import AgentRegistry
    from jarvis.application.tools.catalogue import ToolCatalogue
    from jarvis.entrypoints.settings import LoadedConfig


@dataclass(slots=True)
class NameCheck:
    """What :func:`check_names` found: errors (every run would fail) and warnings."""

    errors: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """The file's key and what may be wrong with it."""

    def error(self, loaded: LoadedConfig) -> ConfigurationError:
        """The configuration error listing every error (usage error: exit 2)."""
        return ConfigurationError(
            f"Invalid config file {loaded.file}: " + "; ".join(self.errors),
            hint="Fix the name (`jarvis agents` and `jarvis tools` list them), or remove the "
            "key for the default.",
        )


def written_key(loaded: LoadedConfig, key: str) -> str | None:
    """The key of the file that set the jarvis key ``key``: itself, or the OpenJarvis key
    read as it (``agent.default_agent``); ``None`` when the file did not set it."""
    if not loaded.found:
        return None
    if get_key(loaded.raw, key)[0]:
        return key
    for note in loaded.notes:
        if note.kind == "read_as" and note.detail.split(" ", 1)[0] == key:
            return note.key
    return None


def _unknown_default_agent(loaded: LoadedConfig, registry: AgentRegistry) -> tuple[str, str]:
    """The file's key and the known agents, when the default agent it sets is unknown;
    ``("", "")`` otherwise (a plug-in that cannot be loaded raises its own error)."""
    written = written_key(loaded, "agent.default")
    if written is None:
        return "", ""
    try:
        registry.resolve(loaded.config.agent.default)
    except UnknownAgentError as exc:
        return written, ", ".join(exc.known)
    return "", ""


def check_default_agent(loaded: LoadedConfig, registry: AgentRegistry) -> None:
    """Raise :class:`UnknownAgentError` saying which key of which file named the unknown
    default agent (``jarvis ask`` without ``--agent``)."""
    written, known = _unknown_default_agent(loaded, registry)
    if written:
        name = loaded.config.agent.default
        section, _, key = written.rpartition(".")
        error = UnknownAgentError(name, known.split(", "))
        error.message = f"Unknown agent '{shown(name)}' ([{section}] {key} in {loaded.file})."
        error.hint = f"Known agents: {known} (`jarvis agents`); or remove the key for simple."
        raise error


def check_enabled_tools(loaded: LoadedConfig, catalogue: ToolCatalogue, found: NameCheck) -> None:
    """Add to ``found`` each ``[tools] enabled`` name the catalogue does not know."""
    written = written_key(loaded, "tools.enabled") or "tools.enabled"
    mcp = catalogue.mcp
    servers = ", ".join(mcp.servers()) if mcp is not None else ""
    for name in loaded.config.tools.enabled:
        try:
            catalogue.validate([name])
        except PluginError:
            raise
        except ConfigurationError:
            if servers and "." not in name:
                found.warnings.append(
                    (
                        written,
                        f"'{shown(name)}' is no built-in or plug-in tool; an MCP server "
                        f"({servers}) "
                        "may offer it (servers are not started by config check)",
                    )
                )
            else:
                known = ", ".join(catalogue.names()) + (
                    f"; MCP servers: {servers}" if servers else ""
                )
                found.errors.append(f"{written}: unknown tool '{shown(name)}' (known: {known})")


def check_names(
    loaded: LoadedConfig, registry: AgentRegistry, catalogue: ToolCatalogue | None
) -> NameCheck:
    """The default agent and the default tools of ``loaded``, checked."""
    found = NameCheck()
    written, known = _unknown_default_agent(loaded, registry)
    if written:
        found.errors.append(
            f"{written}: unknown agent '{shown(loaded.config.agent.default)}' (known: {known})"
        )
    if catalogue is not None:
        check_enabled_tools(loaded, catalogue, found)
    return found
