"""One running sandbox container, spoken to over its attach socket.

The socket is read and written on the event loop (non-blocking, no thread per container);
the other API calls go to worker threads. A reader task demultiplexes the frames, splits
stdout into lines (each bounded) and keeps the last part of stderr. It stops reading while
``queued_lines`` lines wait unread, so a container that writes faster than its caller reads
is slowed down instead of filling memory; once ``wait`` is called, lines beyond that are
dropped so that the container can run to its end.

Every way out goes through :meth:`_finish`, once, which starts by itself when the stream
ends (a caller that never calls ``wait`` still frees the slot): exit code from
``inspect`` (reading to EOF then inspecting is immediate, the API's ``wait`` adds 0.3-0.5 s),
then the container is removed and its slot given back. ``kill`` and the timeout
force-remove the container first, which ends the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from jarvis.adapters.docker_containers.api import Attached, DockerApi
from jarvis.adapters.docker_containers.frames import (
    STDERR,
    FrameDecoder,
    FrameError,
    LineSplitter,
    Tail,
)
from jarvis.adapters.docker_containers.options import ContainerSettings
from jarvis.adapters.docker_containers.slots import SlotGate
from jarvis.domain.errors import SandboxError
from jarvis.domain.ports import ContainerExit, ContainerExitReason

READ_SIZE = 256 * 1024
OOM_EXIT = 137
_POLL = (0.005, 0.01, 0.02, 0.05, 0.1)


class DockerContainerProcess:
    def __init__(
        self,
        *,
        api: DockerApi,
        container_id: str,
        attached: Attached,
        settings: ContainerSettings,
        gate: SlotGate,
        timeout: float | None,
    ) -> None:
        self._api = api
        self._id = container_id
        self._attached = attached
        self._sock = attached.sock
        self._sock.setblocking(False)
        self._settings = settings
        self._gate = gate
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._space = asyncio.Event()
        self._discard = False
        self._dropped = 0
        self._error: SandboxError | None = None
        self._stderr = Tail(settings.stderr_bytes)
        self._stdin_open = True
        self._reason: ContainerExitReason | None = None
        self._exit: ContainerExit | None = None
        self._stream_ended = asyncio.Event()
        self._reader = self._loop.create_task(self._read())
        self._finisher: asyncio.Task[ContainerExit] | None = None
        self._remover: asyncio.Future[bool] | None = None
        self._ending = False
        self._watchdog = (
            None
            if timeout is None
            else self._loop.call_later(timeout, self._stop, ContainerExitReason.TIMED_OUT)
        )

    @property
    def id(self) -> str:
        return self._id

    @property
    def dropped_lines(self) -> int:
        """Lines dropped after ``wait`` because nobody read them."""
        return self._dropped

    # --- stdio -------------------------------------------------------------------------

    async def send(self, line: str) -> None:
        if "\n" in line or "\x00" in line:
            raise SandboxError("A line sent to a container cannot contain a newline or NUL.")
        if self._reason is not None or self._ending or not self._stdin_open:
            raise SandboxError("The container is no longer reading its input.")
        data = line.encode("utf-8", errors="surrogatepass") + b"\n"
        try:
            await self._loop.sock_sendall(self._sock, data)
        except OSError as exc:
            raise SandboxError(f"The container is no longer running ({exc}).") from exc

    async def close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_WR)

    async def receive(self) -> str | None:
        item = await self._lines.get()
        self._space.set()
        if item is None:
            self._lines.put_nowait(None)  # the end stays the end for later calls
            if self._error is not None:
                raise self._error
            return None
        return item.decode("utf-8", errors="replace")

    async def _read(self) -> None:
        decoder = FrameDecoder()
        lines = LineSplitter(self._settings.max_line_bytes)
        try:
            while True:
                data = await self._loop.sock_recv(self._sock, READ_SIZE)
                if not data:
                    break
                for stream, piece in decoder.feed(data):
                    if stream == STDERR:
                        self._stderr.feed(piece)
                        continue
                    for line in lines.feed(piece):
                        await self._queue(line)
            rest = lines.finish()
            if rest is not None:
                await self._queue(rest)
        except FrameError as exc:
            self._error = SandboxError(f"The container's output was refused: {exc}.")
            self._stop(ContainerExitReason.KILLED)
        except OSError:
            pass  # the socket was closed: the container was removed
        finally:
            self._lines.put_nowait(None)
            self._stream_ended.set()
            self._finishing()  # removed (and its slot freed) as soon as it ends

    async def _queue(self, line: bytes) -> None:
        while self._lines.qsize() >= self._settings.queued_lines and not self._discard:
            self._space.clear()
            await self._space.wait()
        if self._discard and self._lines.qsize() >= self._settings.queued_lines:
            self._dropped += 1
            return
        self._lines.put_nowait(line)

    # --- the end -----------------------------------------------------------------------

    async def wait(self, timeout: float | None = None) -> ContainerExit:
        self._discard = True
        self._space.set()
        finisher = self._finishing()
        try:
            return await asyncio.wait_for(asyncio.shield(finisher), timeout)
        except TimeoutError:
            self._stop(ContainerExitReason.TIMED_OUT)
            return await asyncio.shield(finisher)

    async def kill(self) -> None:
        self._stop(ContainerExitReason.KILLED)
        await asyncio.shield(self._finishing())

    def _stop(self, reason: ContainerExitReason) -> None:
        """Force-remove it (unless it is already ending); the finisher reports ``reason``."""
        if self._ending or self._reason is not None:
            return
        self._reason = reason
        self._removing()  # its stream ends when it is gone
        self._finishing()

    def _removing(self) -> asyncio.Future[bool]:
        if self._remover is None:
            self._remover = self._loop.run_in_executor(None, self._api.remove, self._id)
        return self._remover

    def _finishing(self) -> asyncio.Task[ContainerExit]:
        if self._finisher is None:
            self._finisher = self._loop.create_task(self._finish())
        return self._finisher

    async def _finish(self) -> ContainerExit:
        code: int | None = None
        try:
            await self._stream_ended.wait()
            if self._reason is None:
                code = await self._exit_code()
        finally:
            self._ending = True
            if self._watchdog is not None:
                self._watchdog.cancel()
            await asyncio.shield(self._removing())
            if not self._reader.done():  # a runtime that keeps the stream open after removal
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._stream_ended.wait()), 5)
                self._reader.cancel()
            self._close_socket()
            self._gate.release()
        if self._reason is not None:
            reason, code = self._reason, OOM_EXIT
        elif code is None:  # removed by someone else meanwhile
            reason, code = ContainerExitReason.KILLED, OOM_EXIT
        elif code == OOM_EXIT:
            reason = ContainerExitReason.OUT_OF_MEMORY
        else:
            reason = ContainerExitReason.EXITED
        self._exit = ContainerExit(code=code, reason=reason, stderr=self._stderr.text())
        return self._exit

    async def _exit_code(self) -> int | None:
        """The exit code once ``inspect`` says it stopped; ``None`` if it was removed.

        Its stdout may end before the container does (it closed stdout): then this polls,
        until the container ends or the timeout removes it."""
        attempt = 0
        while self._reason is None:
            state = await self._loop.run_in_executor(None, self._api.state, self._id)
            if state is None:
                return None
            running, code = state
            if not running:
                return code
            await asyncio.sleep(_POLL[min(attempt, len(_POLL) - 1)])
            attempt += 1
        return None

    def _close_socket(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        close = getattr(self._attached.keep, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
