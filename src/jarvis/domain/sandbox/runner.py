"""Value objects and the runner port of the ``sandboxed`` agent.

The ``sandboxed`` agent runs another agent inside a container. What it needs from the host
is a :class:`SandboxRunner`: something that checks the requested mounts against the mount
policy (before any container exists) and starts the sandbox container. The domain knows
nothing of Docker or Podman: the runner talks to a ``ContainerPort``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from jarvis.domain.errors import ConfigurationError, SandboxError
from jarvis.domain.ports import ContainerProcess, Mount

INSIDE_TOOLS: Final = frozenset({"calculator", "think", "file_read", "code_interpreter"})
"""Tools that run inside the container itself: they need nothing from the host (file_read
reads the mounts, code_interpreter runs in the container). Every other tool needs the host
and is offered inside only when the user allows it (``host_tools``), brokered to the host."""

SANDBOX_OPTIONS: Final = frozenset({"inner", "host_tools"})
"""Agent options that configure the sandbox itself, not the inner agent."""


class MountRefusedError(ConfigurationError, ValueError):
    """A requested mount is blocked, outside the allowlist's roots, or malformed. Raised
    before any container starts (a ``ValueError`` too, as the mission's API says)."""


class SandboxRunError(SandboxError):
    """The sandboxed run did not end with an answer: its container timed out, ran out of
    memory, exited, or broke the protocol (and was killed). ``reason`` says which."""

    def __init__(self, message: str, *, reason: str, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class MountRequest:
    """A host folder the user asked to make visible inside the sandbox.

    ``source`` as given (relative paths are taken from the current directory); ``target``
    ``""`` = ``/mnt/<folder name>``; read-only unless ``read_only=False`` (which the mount
    policy must allow)."""

    source: str
    target: str = ""
    read_only: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """What one sandbox container may use (``[sandbox]``)."""

    timeout: float = 300.0
    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 128
    tmp_mb: int = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLaunch:
    """A started sandbox: its process and what it was given."""

    process: ContainerProcess
    mounts: tuple[Mount, ...]
    image: str
    runtime: str
    limits: SandboxLimits = field(default_factory=SandboxLimits)


class SandboxRunner(Protocol):
    """Checks mounts and starts sandbox containers (the mission's ``ContainerRunner``)."""

    @property
    def runtime(self) -> str:
        """``docker`` or ``podman`` (or a fake's name)."""
        ...

    def check_mounts(self, mounts: Sequence[MountRequest]) -> tuple[Mount, ...]:
        """The mounts as the container will get them (absolute, resolved sources).

        Raises :class:`MountRefusedError` for a blocked or out-of-root path, a folder that
        contains a blocked path, a write the policy does not allow, or a malformed request.
        Starts nothing."""
        ...

    async def launch(self, mounts: tuple[Mount, ...], *, run_id: str) -> SandboxLaunch:
        """Start the sandbox container running the inner side of the protocol (stdin
        open). Builds the image first when it is missing. Raises ``SandboxError``
        subclasses when there is no runtime or no image."""
        ...
