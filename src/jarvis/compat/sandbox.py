"""OpenJarvis's ``ContainerRunner(image=..., timeout=..., mount_allowlist_path=...,
max_concurrent=..., runtime="docker" | "podman")`` and ``SandboxedAgent``.

The runner is jarvis's (:class:`jarvis.application.sandbox_runner.ContainerRunner`) on the
Docker or Podman API socket, with those settings over ``[sandbox]``. OpenJarvis's own image
(``openjarvis-sandbox:latest``, its default) does not speak jarvis's sandbox protocol: naming
it means jarvis's image, built locally on first use (``jarvis sandbox build``).
``SandboxedAgent`` is jarvis's, behind OpenJarvis's constructor (``agent, runner, engine,
model, workspace, mounts, secrets, bus``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from jarvis.application.openjarvis_config import OPENJARVIS_SANDBOX_IMAGE
from jarvis.application.sandbox_runner import ContainerRunner as JarvisContainerRunner
from jarvis.domain.agents.sandboxed import SandboxedAgent as JarvisSandboxedAgent
from jarvis.domain.agents.sandboxed import SandboxMounts
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.events import EventBus
from jarvis.domain.sandbox.runner import MountRequest, SandboxLimits, SandboxRunner

RUNTIMES = ("auto", "docker", "podman")


class ContainerRunner(JarvisContainerRunner):
    """OpenJarvis's constructor over jarvis's runner; the runtime is contacted on first
    use (an unavailable one is ``ContainerRuntimeUnavailableError`` then, exit code 6 in
    the CLI)."""

    def __init__(
        self,
        image: str = OPENJARVIS_SANDBOX_IMAGE,
        timeout: float = 300,
        mount_allowlist_path: str = "",
        max_concurrent: int = 5,
        runtime: Literal["auto", "docker", "podman"] = "docker",
    ) -> None:
        from jarvis.entrypoints.composition.runtimes import container_runtime_for
        from jarvis.entrypoints.settings import config_dir, load_config

        if runtime not in RUNTIMES:
            raise ConfigurationError(
                f"Unknown container runtime {runtime!r}.", hint="Use docker or podman."
            )
        if timeout <= 0 or max_concurrent < 1:
            raise ConfigurationError("timeout must be positive and max_concurrent at least 1.")
        config = load_config()
        sandbox = replace(
            config.sandbox,
            image="" if image == OPENJARVIS_SANDBOX_IMAGE else image,
            timeout=float(timeout),
            mount_allowlist_path=mount_allowlist_path,
            max_concurrent=max_concurrent,
            runtime=runtime,
        )
        self.image = image
        self.timeout = float(timeout)
        self.max_concurrent = max_concurrent
        self.runtime_name = runtime
        super().__init__(
            container_runtime_for(replace(config, sandbox=sandbox)),
            limits=SandboxLimits(
                timeout=sandbox.timeout,
                memory_mb=sandbox.memory_mb,
                cpus=sandbox.cpus,
                pids=sandbox.pids,
            ),
            mount_allowlist_path=mount_allowlist_path,
            protected_paths=(str(config_dir()),),
        )


class SandboxedAgent(JarvisSandboxedAgent):
    """OpenJarvis's ``SandboxedAgent(agent, runner, engine=None, model="", workspace="",
    mounts=(), secrets=None, bus=None)`` over jarvis's (whose settings travel as value
    objects)."""

    def __init__(
        self,
        agent: BaseAgent,
        runner: SandboxRunner,
        engine: InferencePort | None = None,
        model: str = "",
        workspace: str = "",
        mounts: Sequence[MountRequest | str] = (),
        secrets: Mapping[str, str] | None = None,
        bus: EventBus | None = None,
    ) -> None:
        super().__init__(
            agent,
            runner,
            engine,
            model,
            bus,
            mounts=SandboxMounts(workspace=workspace, requests=tuple(mounts)),
            secrets=secrets,
        )


__all__ = ["ContainerRunner", "SandboxedAgent"]
