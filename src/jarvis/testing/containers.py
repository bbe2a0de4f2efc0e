"""``InMemoryContainerRuntime``: a container runtime whose "containers" are coroutines.

A container's behaviour is a handler that maps each line written to its stdin to the lines
it prints; the default handler echoes, like a container running ``cat``. Closing its stdin
ends it with exit code 0, as ``cat`` does. Every started spec is recorded, so tests can
assert that the network was off and the mounts were right; ``peak_running`` says how many
existed at once. Like the real runtime it enforces ``max_concurrent`` and each spec's
``timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from jarvis.domain.errors import ContainerImageError, ContainerRuntimeUnavailableError, SandboxError
from jarvis.domain.ports import (
    ContainerExit,
    ContainerExitReason,
    ContainerRuntimeStatus,
    ContainerSpec,
    ImageProgress,
    OrphanContainer,
)

LineHandler = Callable[[ContainerSpec, str], list[str]]
IMAGE = "localhost/jarvis-sandbox:in-memory"


def echo(_spec: ContainerSpec, line: str) -> list[str]:
    return [line]


class InMemoryContainerProcess:
    def __init__(self, runtime: InMemoryContainerRuntime, spec: ContainerSpec, number: int) -> None:
        self._runtime = runtime
        self.spec = spec
        self._id = f"in-memory-{number}"
        self._output: asyncio.Queue[str | None] = asyncio.Queue()
        self._ended = asyncio.Event()
        self._exit: ContainerExit | None = None
        self._timer: asyncio.TimerHandle | None = None
        timeout = spec.timeout if spec.timeout is not None else runtime.default_timeout
        if timeout is not None:
            self._timer = asyncio.get_running_loop().call_later(
                timeout, self._end, 137, ContainerExitReason.TIMED_OUT
            )

    @property
    def id(self) -> str:
        return self._id

    @property
    def killed(self) -> bool:
        return self._exit is not None and self._exit.reason is not ContainerExitReason.EXITED

    async def send(self, line: str) -> None:
        if "\n" in line:
            raise SandboxError("A line sent to a container cannot contain a newline.")
        if self._exit is not None:
            raise SandboxError("The container is no longer running.")
        for out in self._runtime.handler(self.spec, line):
            self._output.put_nowait(out)

    async def close_stdin(self) -> None:
        self._end(0, ContainerExitReason.EXITED)

    async def receive(self) -> str | None:
        if self._exit is not None and self._output.empty():
            return None
        return await self._output.get()

    async def wait(self, timeout: float | None = None) -> ContainerExit:
        try:
            await asyncio.wait_for(self._ended.wait(), timeout)
        except TimeoutError:
            self._end(137, ContainerExitReason.TIMED_OUT)
        assert self._exit is not None
        return self._exit

    async def kill(self) -> None:
        self._end(137, ContainerExitReason.KILLED)

    def _end(self, code: int, reason: ContainerExitReason) -> None:
        if self._exit is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._exit = ContainerExit(code=code, reason=reason)
        self._output.put_nowait(None)
        self._ended.set()
        self._runtime._removed(self)


class InMemoryContainerRuntime:
    """Satisfies ``ContainerPort``; ``available=False`` simulates a missing runtime,
    ``image_present=False`` an image that is missing and cannot be built."""

    def __init__(
        self,
        handler: LineHandler = echo,
        *,
        available: bool = True,
        image_present: bool = True,
        max_concurrent: int = 5,
        default_timeout: float | None = 300.0,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.handler = handler
        self._available = available
        self._image_present = image_present
        self.max_concurrent = max_concurrent
        self.default_timeout = default_timeout
        self.started: list[ContainerSpec] = []
        self.peak_running = 0
        self.image_builds = 0
        self._running: set[InMemoryContainerProcess] = set()
        self._slots: asyncio.Semaphore | None = None
        self.abandoned: list[OrphanContainer] = []

    @property
    def runtime(self) -> str:
        return "in-memory"

    @property
    def running(self) -> int:
        return len(self._running)

    async def available(self) -> bool:
        return self._available

    async def status(self) -> ContainerRuntimeStatus:
        return ContainerRuntimeStatus(
            runtime=self.runtime,
            endpoint="memory://",
            available=self._available,
            version="0",
            image=IMAGE,
            image_present=self._available and self._image_present and self.image_builds > 0,
            detail="" if self._available else "simulated: no container runtime",
        )

    async def ensure_image(self, progress: ImageProgress | None = None) -> str:
        self._require_runtime()
        if not self._image_present:
            raise ContainerImageError("The sandbox image cannot be built.", image=IMAGE)
        if self.image_builds == 0:
            if progress is not None:
                progress(f"Building the sandbox image {IMAGE}")
            self.image_builds += 1
        return IMAGE

    async def start(self, spec: ContainerSpec) -> InMemoryContainerProcess:
        self._require_runtime()
        if not self._image_present:
            raise ContainerImageError(f"No such image: {spec.image}", image=spec.image)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        await self._slots.acquire()
        self.started.append(spec)
        process = InMemoryContainerProcess(self, spec, len(self.started))
        self._running.add(process)
        self.peak_running = max(self.peak_running, len(self._running))
        return process

    async def cleanup_orphans(self) -> int:
        orphans = list(self._running)
        for process in orphans:
            await process.kill()
        return len(orphans)

    async def orphans(self, *, remove: bool) -> list[OrphanContainer]:
        """Containers of processes that are gone: those :meth:`abandon` made."""
        self._require_runtime()
        found = [replace(o, removed=remove) for o in self.abandoned]
        if remove:
            self.abandoned.clear()
        return found

    def abandon(self, container_id: str) -> None:
        """Play a container left behind by a jarvis process that was killed."""
        self.abandoned.append(OrphanContainer(id=container_id, state="running", owner="gone"))

    def _require_runtime(self) -> None:
        if not self._available:
            raise ContainerRuntimeUnavailableError(
                "No container runtime is available.", hint="simulated by the test"
            )

    def _removed(self, process: InMemoryContainerProcess) -> None:
        if process in self._running:
            self._running.discard(process)
            if self._slots is not None:
                self._slots.release()
