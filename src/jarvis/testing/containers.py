"""``InMemoryContainerRuntime``: a container runtime whose "containers" are coroutines.

A container's behaviour is a handler that maps each line written to its stdin to the lines
it prints; the default handler echoes, like a container running ``cat``. Every started
spec is recorded, so tests can assert that the network was off and the mounts were right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jarvis.domain.errors import SandboxError
from jarvis.domain.ports import ContainerSpec

LineHandler = Callable[[ContainerSpec, str], list[str]]


def echo(_spec: ContainerSpec, line: str) -> list[str]:
    return [line]


class InMemoryContainerProcess:
    def __init__(self, runtime: InMemoryContainerRuntime, spec: ContainerSpec) -> None:
        self._runtime = runtime
        self.spec = spec
        self._output: asyncio.Queue[str | None] = asyncio.Queue()
        self.killed = False
        self.exit_code: int | None = None

    async def send(self, line: str) -> None:
        if self.killed:
            raise SandboxError("The container is no longer running.")
        for out in self._runtime.handler(self.spec, line):
            self._output.put_nowait(out)

    async def receive(self) -> str | None:
        if self.killed and self._output.empty():
            return None
        return await self._output.get()

    async def wait(self, timeout: float | None = None) -> int:
        if self.exit_code is None:
            if timeout is None:
                raise SandboxError("An in-memory container only exits when killed.")
            await asyncio.sleep(timeout)
            await self.kill()
        return self.exit_code if self.exit_code is not None else 137

    async def kill(self) -> None:
        if not self.killed:
            self.killed = True
            self.exit_code = 137
            self._output.put_nowait(None)
        self._runtime._running.discard(self)


class InMemoryContainerRuntime:
    """Satisfies ``ContainerPort``; ``available=False`` simulates a missing runtime."""

    def __init__(self, handler: LineHandler = echo, *, available: bool = True) -> None:
        self.handler = handler
        self._available = available
        self.started: list[ContainerSpec] = []
        self._running: set[InMemoryContainerProcess] = set()

    @property
    def runtime(self) -> str:
        return "in-memory"

    async def available(self) -> bool:
        return self._available

    async def start(self, spec: ContainerSpec) -> InMemoryContainerProcess:
        if not self._available:
            raise SandboxError("No container runtime is available.")
        self.started.append(spec)
        process = InMemoryContainerProcess(self, spec)
        self._running.add(process)
        return process

    async def cleanup_orphans(self) -> int:
        orphans = list(self._running)
        for process in orphans:
            await process.kill()
        return len(orphans)
