"""A container runtime whose "containers" run the real sandbox worker in this process.

Each started container runs :func:`jarvis.entrypoints.sandbox_worker.serve` as a task,
its stdin and stdout being queues of lines: the host side of the sandboxed agent and the
inside (the same code the image runs) talk exactly as over a container's stdio, without
Podman. ``hostile`` replaces the worker with a coroutine of the test's, to play a container
that floods or lies. Satisfies ``ContainerPort``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from jarvis.domain.ports import (
    ContainerExit,
    ContainerExitReason,
    ContainerRuntimeStatus,
    ContainerSpec,
    ImageProgress,
    OrphanContainer,
)
from jarvis.domain.sandbox.client import LineSink

Inside = Callable[[Callable[[], Awaitable[str | None]], LineSink], Awaitable[int]]


class _QueueSink:
    def __init__(self, queue: asyncio.Queue[str | None]) -> None:
        self._queue = queue

    async def write_line(self, line: str) -> None:
        assert "\n" not in line
        self._queue.put_nowait(line)


class InProcessSandbox:
    def __init__(self, spec: ContainerSpec, inside: Inside, number: int) -> None:
        self.spec = spec
        self._id = f"in-process-{number}"
        self.stdin: asyncio.Queue[str | None] = asyncio.Queue()
        self.stdout: asyncio.Queue[str | None] = asyncio.Queue()
        self.sent: list[str] = []
        self._reason: ContainerExitReason | None = None

        async def read_line() -> str | None:
            line = await self.stdin.get()
            if line is None:
                self.stdin.put_nowait(None)
            return line

        async def body() -> int:
            try:
                return await inside(read_line, _QueueSink(self.stdout))
            finally:
                self.stdout.put_nowait(None)

        self._task = asyncio.ensure_future(body())
        self._timer = (
            None
            if spec.timeout is None
            else asyncio.get_running_loop().call_later(
                spec.timeout, self._stop, ContainerExitReason.TIMED_OUT
            )
        )

    @property
    def id(self) -> str:
        return self._id

    @property
    def removed(self) -> bool:
        return self._task.done()

    async def send(self, line: str) -> None:
        from jarvis.domain.errors import SandboxError

        if self._task.done():
            raise SandboxError("gone")
        self.sent.append(line)
        self.stdin.put_nowait(line)

    async def close_stdin(self) -> None:
        self.stdin.put_nowait(None)

    async def receive(self) -> str | None:
        line = await self.stdout.get()
        if line is None:
            self.stdout.put_nowait(None)
        return line

    def _stop(self, reason: ContainerExitReason) -> None:
        if self._reason is None and not self._task.done():
            self._reason = reason
            self._task.cancel()

    async def wait(self, timeout: float | None = None) -> ContainerExit:
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._stop(ContainerExitReason.TIMED_OUT)
        except (asyncio.CancelledError, Exception):
            pass
        with contextlib.suppress(BaseException):
            await self._task
        if self._timer is not None:
            self._timer.cancel()
        if self._reason is not None:
            return ContainerExit(code=137, reason=self._reason)
        code = self._task.result() if not self._task.cancelled() else 137
        return ContainerExit(code=code, reason=ContainerExitReason.EXITED)

    async def kill(self) -> None:
        self._stop(ContainerExitReason.KILLED)
        with contextlib.suppress(BaseException):
            await self._task


class InProcessContainers:
    def __init__(self, inside: Inside | None = None) -> None:
        if inside is None:
            from jarvis.entrypoints.sandbox_worker import serve

            inside = serve
        self.inside = inside
        self.started: list[InProcessSandbox] = []

    @property
    def runtime(self) -> str:
        return "in-process"

    async def available(self) -> bool:
        return True

    async def status(self) -> ContainerRuntimeStatus:
        return ContainerRuntimeStatus(runtime="in-process", endpoint="", available=True)

    async def ensure_image(self, progress: ImageProgress | None = None) -> str:
        return "in-process"

    async def start(self, spec: ContainerSpec) -> InProcessSandbox:
        sandbox = InProcessSandbox(spec, self.inside, len(self.started) + 1)
        self.started.append(sandbox)
        return sandbox

    async def cleanup_orphans(self) -> int:
        return 0

    async def orphans(self, *, remove: bool) -> list[OrphanContainer]:
        return []
