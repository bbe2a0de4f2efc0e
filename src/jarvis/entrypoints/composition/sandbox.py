"""The ``sandboxed`` agent's runner: a container per run, under ``[sandbox]``'s limits.

Imported only when a question asks for that agent (through
:func:`~jarvis.entrypoints.composition.runtimes.sandboxed_agents`): its modules and
pydantic cost a plain question some 50 ms.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from jarvis.application.config import JarvisConfig
from jarvis.application.sandbox_runner import ContainerRunner
from jarvis.application.sandboxed_ask import SandboxedAgents
from jarvis.domain.ports import ContainerPort
from jarvis.domain.sandbox.runner import SandboxLimits
from jarvis.entrypoints.settings import config_dir


def image_progress(line: str) -> None:
    """Image build progress, on stderr (stdout carries the answer)."""
    if sys.stderr is not None:
        sys.stderr.write(f"jarvis: {line}\n")
        sys.stderr.flush()


def sandboxed_agents(
    *, containers: Callable[[], ContainerPort], config: JarvisConfig
) -> SandboxedAgents:
    """The runner of the ``sandboxed`` agent, over the container runtime (contacted when a
    run first needs it)."""
    sandbox = config.sandbox
    limits = SandboxLimits(
        timeout=sandbox.timeout, memory_mb=sandbox.memory_mb, cpus=sandbox.cpus, pids=sandbox.pids
    )
    return SandboxedAgents(
        lambda: ContainerRunner(
            containers(),
            limits=limits,
            mount_allowlist_path=sandbox.mount_allowlist_path,
            progress=image_progress,
            protected_paths=(str(config_dir()),),
        )
    )
