"""The container runtime the sandbox runs agents in, and what it is told and reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount:
    """A host folder bound into a container. ``device`` and ``inode`` (0: not recorded)
    are those of the folder the mount policy checked: the runtime binds that folder or
    refuses, so a folder swapped after the check (for a link elsewhere) is never bound."""

    source: str
    target: str
    read_only: bool = True
    device: int = 0
    inode: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerSpec:
    """How to start one sandbox container. The network is off unless asked for.

    ``timeout`` (seconds from start; ``None``: the runtime's default) is enforced by the
    runtime itself: past it the container is force-removed whatever its caller does, so a
    caller that forgets a container cannot keep it alive. ``run_id`` labels the container
    as one run's (in listings and in its name).
    """

    image: str
    command: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    network: bool = False
    memory_mb: int = 512
    cpus: float = 1.0
    pids_limit: int = 128
    tmp_mb: int = 64
    timeout: float | None = None
    workdir: str = ""
    run_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


class ContainerExitReason(StrEnum):
    EXITED = "exited"
    """It ended by itself; ``code`` is its own."""
    OUT_OF_MEMORY = "out_of_memory"
    """Killed by SIGKILL that jarvis did not send (137): the memory limit's OOM killer."""
    TIMED_OUT = "timed_out"
    """Still running at its timeout: force-removed."""
    KILLED = "killed"
    """Force-removed on its caller's request before it ended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerExit:
    """How a container ended. ``stderr`` is the last part of what it wrote there (bounded)."""

    code: int
    reason: ContainerExitReason
    stderr: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerRuntimeStatus:
    """What ``jarvis sandbox status`` reports; ``detail`` says why when not ``available``."""

    runtime: str
    endpoint: str
    available: bool
    version: str = ""
    image: str = ""
    image_present: bool = False
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanContainer:
    """A sandbox container whose jarvis process is gone (``jarvis sandbox cleanup``)."""

    id: str
    name: str = ""
    state: str = ""
    owner: str = ""
    """``host:pid:start time`` of the jarvis process that started it."""
    run: str = ""
    removed: bool = False


ImageProgress = Callable[[str], None]
"""Receives one human-readable line per step of an image build."""


class ContainerProcess(Protocol):
    """A running container spoken to line by line over its stdio (newline-delimited text)."""

    @property
    def id(self) -> str:
        """The runtime's id of the container."""
        ...

    async def send(self, line: str) -> None:
        """Write one line (no newline inside; one is appended) to the container's stdin.

        Raises ``SandboxError`` once the container is gone."""
        ...

    async def close_stdin(self) -> None:
        """End the container's stdin (it reads EOF). Idempotent."""
        ...

    async def receive(self) -> str | None:
        """The next line of its stdout, without the newline; ``None`` at end of stream.

        A line longer than the runtime's bound raises ``SandboxError`` (and the container
        is removed): a container cannot make its caller buffer without limit."""
        ...

    async def wait(self, timeout: float | None = None) -> ContainerExit:
        """Wait for it to end, remove it, and say how it ended. At ``timeout`` (or the
        spec's) it is force-removed and reported as timed out. Lines not yet received stay
        receivable; lines beyond what the runtime buffers are dropped from then on."""
        ...

    async def kill(self) -> None:
        """Force-remove the container; its stdout stream ends. Idempotent."""
        ...


class ContainerPort(Protocol):
    """A container runtime (Docker or Podman) that starts sandboxes and nothing else.

    Every container it starts has no network, a read-only root, no capabilities, an
    unprivileged user, memory / pids / CPU limits, a size-limited ``/tmp`` and jarvis labels.
    At most ``max_concurrent`` of them exist at once: ``start`` waits for a free slot, which
    a container gives back when it is removed (``wait`` or ``kill``).
    """

    @property
    def runtime(self) -> str:
        """``docker``, ``podman`` (or the fake's name)."""
        ...

    async def available(self) -> bool:
        """True when the runtime answers; never raises."""
        ...

    async def status(self) -> ContainerRuntimeStatus:
        """Which runtime, endpoint and image are in use; never raises."""
        ...

    async def ensure_image(self, progress: ImageProgress | None = None) -> str:
        """The sandbox image's reference, built first when it is missing or stale.

        Raises ``ContainerRuntimeUnavailableError`` or ``ContainerImageError``."""
        ...

    async def start(self, spec: ContainerSpec) -> ContainerProcess:
        """Start a labelled container with its stdin open and return its handle.

        Raises ``ContainerRuntimeUnavailableError`` when the runtime cannot be reached,
        ``ContainerImageError`` when ``spec.image`` does not exist, ``SandboxError``
        otherwise; a container that failed to start is removed."""
        ...

    async def cleanup_orphans(self) -> int:
        """Remove every container labelled as this process's or as a process's that is gone
        (running, exited or never started); returns how many were removed."""
        ...

    async def orphans(self, *, remove: bool) -> list[OrphanContainer]:
        """The containers of jarvis processes that are gone (never this process's nor a
        live one's), removed first when ``remove``. The first ``start`` of a runtime
        removes them too."""
        ...
