"""One running worker process: start it, exchange protocol lines, kill it.

In the bubblewrap plans the host's child is ``bwrap``; it starts the first process of a
PID namespace of its own (bubblewrap's init), which starts the interpreter. Killing that
init ends every process in the namespace at once, whatever the code did (``setsid``,
double forks); the host holds a pidfd on it and waits until it is gone. Where no cgroup
bounds the session's memory, a :class:`~jarvis.adapters.subprocess_repl.memory_watch.MemoryWatch`
samples the whole namespace and kills it past the limit. Without a sandbox the worker is
the leader of its own process group, which is killed whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import deque
from collections.abc import Sequence

from pydantic import ValidationError

from jarvis.adapters.subprocess_repl.memory_watch import MemoryWatch
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
FRESH_ROOM = 64 * 1024 * 1024
"""What a fresh interpreter and its first executions need within the session's limit: a
working directory holding more than the limit less this is emptied after a stop for
memory, else every later execution would be stopped again at once."""


class WorkerProtocolError(Exception):
    """The worker said something that is not a protocol message."""


class WorkerProcess:
    """The host's handle on one worker process."""

    def __init__(self, process: asyncio.subprocess.Process, *, sandboxed: bool) -> None:
        self._process = process
        self._sandboxed = sandboxed
        self._namespace_init: int | None = None
        self._init_pid: int | None = None
        self._watch: MemoryWatch | None = None
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._drain = asyncio.ensure_future(self._drain_stderr())
        self.killed_by_host = False

    @classmethod
    async def spawn(
        cls,
        command: Sequence[str],
        *,
        cwd: str,
        env: dict[str, str],
        pass_fds: Sequence[int] = (),
        user: int | None = None,
        sandboxed: bool = False,
    ) -> WorkerProcess:
        """Start ``command``; as ``user`` (uid and gid, no supplementary groups) when given."""
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            limit=MAX_LINE_BYTES,
            pass_fds=tuple(pass_fds),
            user=user,  # None: this process's own (the default)
            group=user,
            extra_groups=None if user is None else [],
        )
        return cls(process, sandboxed=sandboxed)

    def hold_namespace(self) -> list[int]:
        """Take a pidfd on the sandbox's init (call once the worker is ready, before any
        code runs); returns the host pids of the whole tree (for the session's cgroup)."""
        tree = _descendants(self._process.pid)
        if self._sandboxed and len(tree) > 1 and self._namespace_init is None:
            self._init_pid = tree[1]
            with contextlib.suppress(OSError):
                self._namespace_init = os.pidfd_open(tree[1])
        return tree

    def watch_memory(
        self, *, limit_bytes: int, max_processes: int, workdir: str | None = None
    ) -> None:
        """Bound the memory of the whole sandbox by sampling (call after
        :meth:`hold_namespace`, where no cgroup bounds it)."""
        if self._init_pid is None or self._watch is not None:
            return
        self._watch = MemoryWatch(
            root=self._process.pid,
            init=self._init_pid,
            limit_bytes=limit_bytes,
            max_processes=max_processes,
            workdir=workdir,
        )
        self._watch.start()

    @property
    def memory_exceeded(self) -> str | None:
        """Why the memory watch stopped the sandbox, or ``None`` when it did not."""
        watch = self._watch
        if watch is None or watch.exceeded_bytes is None:
            return None
        mb = 1024 * 1024
        return (
            f"the session used more than {watch.limit_bytes // mb} MB of memory in total "
            "(all its processes, its files, /tmp, /dev/shm and sockets together: "
            f"{watch.exceeded_bytes // mb} MB) "
            "and was stopped"
        )

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
        """Kill the sandbox's PID namespace (or the process group) and wait until it is
        gone. Idempotent."""
        if self._watch is not None:
            await asyncio.to_thread(self._watch.stop)
        if self._process.returncode is None:
            self.killed_by_host = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        init, self._namespace_init = self._namespace_init, None
        if init is not None:
            try:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(init, signal.SIGKILL)
                await _wait_readable(init, 5.0)
            finally:
                os.close(init)
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
        exceeded = self.memory_exceeded
        if exceeded is not None:
            return exceeded
        code = self._process.returncode
        if code is None:
            return "the interpreter stopped answering"
        if code < 0:
            return self._describe_signal(-code)
        if code > 128 and self._sandboxed:
            # bubblewrap reports a child killed by signal N as exit status 128 + N
            return self._describe_signal(code - 128)
        if code == 137:
            return "the interpreter was killed (SIGKILL), most likely by a memory or CPU limit"
        if code > 128:
            return f"the interpreter died (exit status {code})"
        return f"the interpreter exited (status {code})"

    @staticmethod
    def _describe_signal(number: int) -> str:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        if number == signal.SIGKILL:
            return f"the interpreter was killed ({name}), most likely by a memory or CPU-time limit"
        if number == signal.SIGXCPU:
            return f"the interpreter used up its CPU-time budget ({name})"
        return f"the interpreter died ({name})"


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, parents before children."""
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop(0)
        found.append(current)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with (
                    contextlib.suppress(OSError, ValueError),
                    open(f"/proc/{current}/task/{task}/children") as children,
                ):
                    pending.extend(int(n) for n in children.read().split())
    return found


async def _wait_readable(fd: int, timeout: float) -> None:
    """Until ``fd`` (a pidfd: the process ended) is readable, at most ``timeout`` s."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready, timeout)
    finally:
        loop.remove_reader(fd)
