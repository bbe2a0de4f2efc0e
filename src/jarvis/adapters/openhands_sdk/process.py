"""One runner process: the 3.12 interpreter running ``runner_script.py`` as a file, in a
private environment, in a process group of its own, its output drained and bounded.

The environment holds only PATH, LANG, a private HOME and TMPDIR (a temporary directory
removed when the run ends: the SDK's terminal writes a shell history there) and the
SDK's persistence dir in jarvis's config dir (conversations continue across runs); none
of the user's variables, so no key or tracing endpoint reaches the SDK. The group is
killed as a whole (the terminal tool starts a shell, the shell its commands), and the
parent-death signal kills the runner even if jarvis itself is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import tempfile
import weakref
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path

from jarvis.adapters.openhands_sdk.wire import MAX_LINE

RUNNER = Path(__file__).with_name("runner_script.py")
OUTPUT_TAIL_LINES = 40
MAX_STDERR_LINE = 2_000
STOP_GRACE = 3.0


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when jarvis dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(pid: int, private: str) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(private, ignore_errors=True)


def runner_environment(private: str, persistence_dir: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": private,
        "TMPDIR": private,
        "XDG_CONFIG_HOME": os.path.join(private, "config"),
        "XDG_CACHE_HOME": os.path.join(private, "cache"),
        "OH_PERSISTENCE_DIR": str(persistence_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "OPENHANDS_SUPPRESS_BANNER": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class RunnerProcess:
    """The runner of one run; :meth:`stop` is idempotent and leaves nothing behind."""

    def __init__(self, python: str, persistence_dir: Path) -> None:
        self.python = python
        self.persistence_dir = persistence_dir
        self.private = tempfile.mkdtemp(prefix="jarvis-openhands-")
        self.tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[int, str], RunnerProcess] | None = None

    async def start(self, request_json: bytes, workspace: str) -> None:
        """Spawns the runner and hands it the request (then closes its stdin)."""
        self._proc = await asyncio.create_subprocess_exec(
            self.python,
            "-I",  # no user site, no PYTHON* variables, not the script's dir on sys.path
            str(RUNNER),
            cwd=workspace,
            env=runner_environment(self.private, self.persistence_dir),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            limit=MAX_LINE,
        )
        self._finalizer = weakref.finalize(self, _kill_group, self._proc.pid, self.private)
        self._drain = asyncio.create_task(self._read_stderr(self._proc))
        stdin = self._proc.stdin
        assert stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(request_json)
            await stdin.drain()
        stdin.close()

    async def lines(self) -> AsyncIterator[str]:
        """The runner's stdout, line by line; a line over :data:`MAX_LINE` is skipped."""
        stream = None if self._proc is None else self._proc.stdout
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.readline()
            except ValueError:  # over the limit: asyncio dropped it, go on with the next
                continue
            if not chunk:
                return
            yield chunk.decode("utf-8", "replace")

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Drains stderr for the whole run (a full pipe would stall the SDK), keeping only
        the last lines for error messages."""
        stream = proc.stderr
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.readline()
            except ValueError:
                continue
            if not chunk:
                return
            self.tail.append(chunk.decode("utf-8", "replace").rstrip()[:MAX_STDERR_LINE])

    async def wait(self) -> int:
        """The exit status, once the runner and its stderr are done."""
        assert self._proc is not None
        code = await self._proc.wait()
        if self._drain is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._drain, STOP_GRACE)
        return code

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def output_hint(self) -> str:
        lines = [line for line in self.tail if line.strip()]
        return "Its last output:\n" + "\n".join(lines[-10:]) if lines else ""

    def stop_now(self) -> None:
        """Kills the group and removes the private dir, without an event loop."""
        if self._proc is not None:
            _kill_group(self._proc.pid, self.private)
        else:
            shutil.rmtree(self.private, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer.detach()

    async def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after a grace period, then every straggler in the
        group; the private dir removed."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain
        if self._finalizer is not None:
            self._finalizer.detach()
        shutil.rmtree(self.private, ignore_errors=True)
