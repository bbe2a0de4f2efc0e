"""One runner process: its own process group, stdin written once, stdout read bounded,
stderr drained, and the whole tree stopped however the run ends.

The runner (``node runner.mjs``) starts the SDK's ``claude`` binary, which starts the
tools' shells: all in the runner's process group, which is a session of its own, so one
``killpg`` stops them all; the parent-death signal kills the runner if jarvis dies first.
Jailed (see ``runtime.py``), the group's leader is bubblewrap and the runner's tree lives
in the jail's PID namespace: a stop kills that whole tree and waits until it has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import weakref
from collections import deque
from collections.abc import AsyncIterator

from jarvis.adapters.claude_agent_sdk.wire import MAX_LINE, MAX_OUTPUT, LineSplitter
from jarvis.adapters.subprocess_repl.child_pipes import release_child_pipes
from jarvis.adapters.subprocess_repl.process_jail import kill_tree, process_tree

STDERR_TAIL_LINES = 30
STOP_GRACE = 5.0
"""Seconds between SIGTERM (the runner aborts the query and prints its block) and SIGKILL."""


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when jarvis dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def kill_group(pid: int) -> None:
    tree = process_tree(pid) - {pid}
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    kill_tree(tree)


class OutputTooLarge(Exception):
    """The runner wrote more than :data:`MAX_OUTPUT` bytes."""


class RunnerProcess:
    """``node runner.mjs`` for one request; :meth:`stop` is idempotent."""

    def __init__(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> None:
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[int], RunnerProcess] | None = None
        self.lines = LineSplitter(MAX_LINE)

    async def start(self, request: bytes) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._finalizer = weakref.finalize(self, kill_group, self.proc.pid)
        self._drain = asyncio.create_task(self._read_stderr(self.proc))
        stdin = self.proc.stdin
        assert stdin is not None  # stdin=PIPE
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(request)
            await stdin.drain()
            stdin.close()

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Drains stderr for the whole run (a full pipe would stall the runner), keeping
        the last lines for an error message."""
        stream = proc.stderr
        if stream is None:
            return
        splitter = LineSplitter(4096)
        while chunk := await stream.read(65536):
            for line in splitter.feed(chunk):
                self.stderr_tail.append(line.decode("utf-8", "replace").rstrip()[:500])

    async def stdout_lines(self) -> AsyncIterator[bytes]:
        """Every whole stdout line, each at most :data:`MAX_LINE` bytes (longer ones are
        dropped); :class:`OutputTooLarge` past :data:`MAX_OUTPUT` bytes in all."""
        assert self.proc is not None
        assert self.proc.stdout is not None
        stream = self.proc.stdout
        total = 0
        while chunk := await stream.read(65536):
            total += len(chunk)
            if total > MAX_OUTPUT:
                raise OutputTooLarge
            for line in self.lines.feed(chunk):
                yield line
        for line in self.lines.finish():
            yield line

    async def wait(self) -> int:
        assert self.proc is not None
        code = await self.proc.wait()
        if self._drain is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._drain, 2.0)
        return code

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def hint(self) -> str:
        lines = [line for line in self.stderr_tail if line]
        return "Its last output:\n" + "\n".join(lines[-10:]) if lines else ""

    def stop_now(self) -> None:
        """SIGKILL to the whole group, without an event loop."""
        if self.proc is not None:
            kill_group(self.proc.pid)
        if self._finalizer is not None:
            self._finalizer.detach()

    async def stop(self) -> None:
        """SIGTERM to the group (the runner aborts its query), SIGKILL after
        :data:`STOP_GRACE` s, then SIGKILL to whatever is left in the group."""
        proc = self.proc
        tree = set() if proc is None or proc.returncode is not None else process_tree(proc.pid)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE)
            except TimeoutError:
                kill_group(proc.pid)
                await proc.wait()
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the claude binary's children, if any
            await asyncio.to_thread(kill_tree, tree - {proc.pid})
        await release_child_pipes(proc, self._drain)
        if self._finalizer is not None:
            self._finalizer.detach()
