"""What runs outside the process: Docker or Podman for the ``sandboxed`` agent, and the
external agents' runtimes (``opencode``, ``claude_code``, ``openhands``).

Each is built on first use and kept, so that a second question reuses a running server;
the container's ``shutdown_resources()`` closes the container runtime's API client and stops
every process the external runtimes started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.config import JarvisConfig
from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.ports import ContainerPort
from jarvis.entrypoints.settings import config_dir

if TYPE_CHECKING:
    from jarvis.adapters.claude_agent_sdk import LoopbackEndpoint
    from jarvis.application.sandboxed_ask import SandboxedAgents
    from jarvis.domain.external_runtime import ExternalRuntimePort, ExternalRuntimesPort
    from jarvis.domain.loop.base import BaseAgent


def container_runtime(config: JarvisConfig) -> Iterator[ContainerPort]:
    """Docker or Podman through its API socket (``[sandbox]``); contacted on first use, its
    API client closed by ``shutdown_resources()`` (its containers are gone by then)."""
    from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime

    sandbox = config.sandbox
    runtime = DockerContainerRuntime(
        ContainerSettings(
            runtime=sandbox.runtime,
            socket=sandbox.socket,
            image=sandbox.image,
            max_concurrent=sandbox.max_concurrent,
            default_timeout=sandbox.timeout,
        )
    )
    try:
        yield runtime
    finally:
        runtime.close()


def container_runtime_for(config: JarvisConfig) -> ContainerPort:
    """Docker or Podman as ``[sandbox]`` says, contacted on first use (the
    OpenJarvis-compatible ``ContainerRunner``); its owner closes it."""
    return next(container_runtime(config))


def sandboxed_agents(
    *, containers: Callable[[], ContainerPort], config: JarvisConfig
) -> SandboxedAgents:
    """The ``sandboxed`` agent's runner (its module, the sandbox client and its protocol
    schemas are imported only now)."""
    from jarvis.entrypoints.composition.sandbox import sandboxed_agents as build

    return build(containers=containers, config=config)


class SandboxOnDemand:
    """The ``sandboxed`` agent's builder, resolved when a question asks for that agent:
    any other question never imports the sandbox client, its protocol schemas and pydantic
    (some 50 ms of a ``jarvis ask``)."""

    def __init__(self, provide: Callable[[], SandboxedAgents]) -> None:
        self._provide = provide

    async def build(self, service: AskService, command: AskQuestion) -> tuple[BaseAgent, str]:
        return await self._provide().build(service, command)


def no_endpoint() -> LoopbackEndpoint | None:
    return None


def loopback_endpoint() -> LoopbackEndpoint:
    """``claude_code``'s Anthropic-compatible endpoint (the web server is imported when
    that agent runs)."""
    from jarvis.entrypoints.composition.loopback import loopback_endpoint as build

    return build()


def _opencode(config: JarvisConfig, _endpoint: LoopbackEndpoint | None) -> ExternalRuntimePort:
    from jarvis.adapters.opencode_server import OpenCodeRuntime

    return OpenCodeRuntime(
        data_dir=config_dir() / "runtimes" / "opencode",
        confine=config.runtimes.confine,
        hidden=(str(config_dir()),),
    )


def _claude_code(config: JarvisConfig, endpoint: LoopbackEndpoint | None) -> ExternalRuntimePort:
    from jarvis.adapters.claude_agent_sdk import ClaudeCodeRuntime

    return ClaudeCodeRuntime(
        install_root=config_dir() / "claude_code_runner",
        state_dir=config_dir() / "runtimes" / "claude_code",
        endpoint=endpoint,
        confine=config.runtimes.confine,
        hidden=(str(config_dir()),),
    )


def _openhands(config: JarvisConfig, _endpoint: LoopbackEndpoint | None) -> ExternalRuntimePort:
    from jarvis.adapters.openhands_sdk import OpenHandsRuntime

    return OpenHandsRuntime(
        data_dir=config_dir() / "runtimes" / "openhands",
        confine=config.runtimes.confine,
        hidden=(str(config_dir()),),
    )


_RUNTIME_BUILDERS: dict[
    str, Callable[[JarvisConfig, LoopbackEndpoint | None], ExternalRuntimePort]
] = {"opencode": _opencode, "claude_code": _claude_code, "openhands": _openhands}


class ExternalRuntimes:
    """The external agents' runtimes (``opencode``, ``claude_code``: its Anthropic-compatible
    endpoint on loopback over the engine), each built on first use and kept, so a
    second question reuses a running server; closing stops every process they started."""

    def __init__(
        self, config: JarvisConfig, endpoint: Callable[[], LoopbackEndpoint | None] = no_endpoint
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        """Makes ``claude_code``'s Anthropic-compatible endpoint over the engine."""
        self._runtimes: dict[str, ExternalRuntimePort] = {}

    def get(self, runtime_id: str) -> ExternalRuntimePort:
        runtime = self._runtimes.get(runtime_id)
        if runtime is not None:
            return runtime
        build = _RUNTIME_BUILDERS.get(runtime_id)
        if build is None:
            raise ExternalRuntimeError(
                f"No external runtime named '{runtime_id}'.", runtime=runtime_id
            )
        endpoint = self._endpoint() if runtime_id == "claude_code" else None
        runtime = self._runtimes[runtime_id] = build(self._config, endpoint)
        return runtime

    def close_now(self) -> None:
        """Stops every runtime's processes at once (no event loop needed)."""
        for runtime in self._runtimes.values():
            close = getattr(runtime, "close_now", None)
            if callable(close):
                close()
        self._runtimes.clear()


def external_runtimes(
    config: JarvisConfig, endpoint: Callable[[], LoopbackEndpoint | None]
) -> Iterator[ExternalRuntimesPort]:
    runtimes = ExternalRuntimes(config, endpoint)
    try:
        yield runtimes
    finally:
        runtimes.close_now()
