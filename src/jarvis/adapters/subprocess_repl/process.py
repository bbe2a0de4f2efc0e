"""One running worker process: start it, exchange protocol lines, kill it.

The worker is the leader of its own process group (and, in the namespace plans, the first
process of its own PID namespace), so killing the group ends everything the code started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import deque
from collections.abc import Sequence

from pydantic import ValidationError

from jarvis.adapters.subprocess_repl.protocol import (
    WORKER_MESSAGE,
    ExecuteRequest,
    SetupMessage,
    SetVariableRequest,
    WorkerMessage,
    _Message,
)

MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest protocol line accepted from a worker; anything longer kills it."""
_STDERR_TAIL = 4096


class WorkerProtocolError(Exception):
    """The worker said something that is not a protocol message."""


class WorkerProcess:
    """The host's handle on one worker process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._drain = asyncio.ensure_future(self._drain_stderr())
        self.killed_by_host = False

    @classmethod
    async def spawn(cls, command: Sequence[str], *, cwd: str, env: dict[str, str]) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    async def send(
        self, message: SetupMessage | ExecuteRequest | SetVariableRequest | _Message
    ) -> None:
        """Write one message; raises ``ConnectionError`` when the worker is gone."""
        stdin = self._process.stdin
        if stdin is None or stdin.is_closing():
            raise ConnectionResetError("the worker's input is closed")
        stdin.write(message.model_dump_json().encode("utf-8") + b"\n")
        await stdin.drain()

    async def receive(self, timeout: float | None = None) -> WorkerMessage | None:
        """The next message, or ``None`` at end of stream. Raises ``TimeoutError`` after
        ``timeout`` seconds and ``WorkerProtocolError`` on anything malformed."""
        stdout = self._process.stdout
        if stdout is None:
            return None
        try:
            line = await asyncio.wait_for(stdout.readline(), timeout)
        except (ValueError, asyncio.LimitOverrunError) as exc:
            raise WorkerProtocolError(f"protocol line too long: {exc}") from None
        if not line:
            return None
        try:
            return WORKER_MESSAGE.validate_json(line)
        except ValidationError as exc:
            raise WorkerProtocolError(f"malformed protocol message: {exc}") from None

    async def kill(self) -> None:
        """Kill the whole process group at once and wait for the worker. Idempotent."""
        if self._process.returncode is None:
            self.killed_by_host = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        await self._finish()

    async def close(self, grace: float = 1.0) -> None:
        """Ask the worker to stop (end of input), then kill it after ``grace`` seconds."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        if self._process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), grace)
        await self.kill()

    async def _finish(self) -> None:
        await self._process.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain, 1.0)
        if not self._drain.done():
            self._drain.cancel()
        transport = getattr(self._process, "_transport", None)
        if transport is not None:
            transport.close()

    async def _drain_stderr(self) -> None:
        """Keep the last few KB of the worker's own stderr (crash reports), drop the rest."""
        stream = self._process.stderr
        if stream is None:
            return
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > _STDERR_TAIL and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())

    def stderr_tail(self) -> str:
        text = b"".join(self._stderr)[-_STDERR_TAIL:].decode("utf-8", "replace").strip()
        return text

    async def wait_exit(self, timeout: float) -> int | None:
        """The exit status once the worker has ended (``None`` if it has not in time)."""
        try:
            return await asyncio.wait_for(self._process.wait(), timeout)
        except TimeoutError:
            return None

    def describe_exit(self) -> str:
        """Why the worker ended, in words."""
        code = self._process.returncode
        if code is None:
            return "the interpreter stopped answering"
        if code < 0:
            number = -code
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            if number == signal.SIGKILL:
                return (
                    f"the interpreter was killed ({name}), most likely by a memory or "
                    "CPU-time limit"
                )
            if number == signal.SIGXCPU:
                return f"the interpreter used up its CPU-time budget ({name})"
            return f"the interpreter died ({name})"
        if code == 137:
            return "the interpreter was killed (SIGKILL), most likely by a memory or CPU limit"
        if code > 128:
            return f"the interpreter died (exit status {code})"
        return f"the interpreter exited (status {code})"
