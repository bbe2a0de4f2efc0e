"""How the ask use case builds a ``sandboxed`` run: ``-a sandboxed -O inner=KEY``.

The inner agent is built on the host first, exactly as it would be without a sandbox (its
options, tools, persona, sampling and model are checked and resolved there, so a mistake is
a usage error before any container starts); the sandboxed agent then sends those settings
into the container, where the same agent is built again around the brokered engine.

Options of the sandbox itself (taken out of the agent options): ``inner`` (the agent to
run, default ``simple``), ``host_tools`` (comma-separated, or a list: host tools the user
allows inside, brokered to the host) and, from the SDK only, ``secrets`` (a mapping of
names to values that reaches the inner side in the protocol's first line only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from jarvis.application.ask import AskQuestion, AskService
from jarvis.domain.agents.sandboxed import InnerAgentSpec, SandboxedAgent, SandboxMounts
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.sandbox.runner import INSIDE_TOOLS, SandboxRunner


def _names(value: JSONValue, option: str) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v).strip() for v in value if str(v).strip()]
    raise ConfigurationError(f"-O {option} takes tool names separated by commas.")


def _secrets(value: JSONValue) -> dict[str, str]:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): str(v) for k, v in value.items()}
    raise ConfigurationError("The sandbox's secrets must map names to strings.")


class SandboxedAgents:
    """Builds sandboxed agents on a runner made on first use (no container runtime is
    contacted by a question that does not ask for the sandbox)."""

    def __init__(self, runner: Callable[[], SandboxRunner]) -> None:
        self._make = runner
        self._runner: SandboxRunner | None = None

    @property
    def runner(self) -> SandboxRunner:
        if self._runner is None:
            self._runner = self._make()
        return self._runner

    async def build(self, service: AskService, command: AskQuestion) -> tuple[BaseAgent, str]:
        options = dict(command.agent_options)
        inner = options.pop("inner", "simple")
        if not isinstance(inner, str) or not inner:
            raise ConfigurationError("-O inner takes an agent key, e.g. -O inner=orchestrator.")
        host = _names(options.pop("host_tools", ""), "host_tools")
        secrets = _secrets(options.pop("secrets", {}))
        key = service.registry.resolve(inner)
        inner_cls = service.registry.get(key)
        if getattr(inner_cls, "wraps_agent", False):
            raise ConfigurationError("A sandboxed agent cannot run another sandboxed agent.")
        names = _tool_names(command, service, key, inner_cls, host)
        inner_command = replace(
            command, agent=key, agent_options=options, tools=tuple(names), mounts=(), skills=False
        )
        agent, model = await service.build_agent(inner_command)
        host_ports = (
            service.tools.build(host, inference=service.inference, model=model)
            if host and service.tools is not None
            else []
        )
        sandboxed = SandboxedAgent(
            agent,
            self.runner,
            engine=service.inference,
            model=model,
            bus=service.bus,
            inner=InnerAgentSpec(
                key=key,
                tools=tuple(n for n in names if n in INSIDE_TOOLS),
                options=options,
                default_max_turns=service.default_max_turns,
            ),
            mounts=SandboxMounts(requests=tuple(command.mounts)),
            secrets=secrets,
            host_tools=host_ports,
        )
        return sandboxed, model


def _tool_names(
    command: AskQuestion,
    service: AskService,
    key: str,
    inner_cls: type[BaseAgent],
    host: list[str],
) -> list[str]:
    """The tools of the inner agent (``command``'s, else the configured ones) and the host
    tools the user allowed; a host tool not allowed, or tools for an agent that takes none,
    are refused."""
    inside_host = [n for n in host if n in INSIDE_TOOLS]
    if inside_host:
        raise ConfigurationError(
            "-O host_tools names tools that run inside the sandbox: " + ", ".join(inside_host),
            hint="Only tools that need the host (web_search, llm...) are brokered.",
        )
    names = list(command.tools) or (list(service.default_tools) if inner_cls.accepts_tools else [])
    names += [n for n in host if n not in names]
    if names and not inner_cls.accepts_tools:
        raise ConfigurationError(
            f"Agent '{key}' does not take tools, but tools were given: " + ", ".join(names),
            hint="Run a tool-using agent inside: -O inner=orchestrator.",
        )
    outside = [n for n in names if n not in INSIDE_TOOLS and n not in host]
    if outside:
        raise ConfigurationError(
            "These tools need the host and are not available inside the sandbox unless "
            "allowed: " + ", ".join(outside),
            hint="Allow them explicitly with -O host_tools="
            + ",".join(outside)
            + " (they then run on the host, with its own checks).",
        )
    return names
