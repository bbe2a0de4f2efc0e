"""The ``opencode serve`` process: private environment, free loopback port, random password,
a real start-up deadline, its output drained, and stopped with its whole process group.

Everything opencode writes goes into private directories: HOME, the XDG dirs and TMPDIR
are a temporary directory removed at stop (each boot leaves a 5.5 MB library in TMPDIR),
except its data dir (sessions, so ``-O session=ID`` continues across runs), which lives in
jarvis's config dir. The password is new for every server: nobody else on the machine can
drive it. The process is started in a session of its own, so stopping it kills its
children too (opencode starts npm in the background), and with the parent-death signal
set, so it dies with jarvis even if jarvis is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import tempfile
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx

from jarvis.domain.errors import ExternalRuntimeError

START_DEADLINE = 60.0
"""Seconds from spawn to a healthy ``/global/health``; measured 2.7-5 s on 2 cores."""
OUTPUT_TAIL_LINES = 40
"""The server's last output lines kept for an error message (the rest is drained away)."""
MAX_LINE = 16_384

_QUIET = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
}


def free_port() -> int:
    """A loopback port nobody listens on now (``--port 0`` means opencode's 4096)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when jarvis dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(pid: int, private: str) -> None:
    """Last resort at interpreter exit (or garbage collection): kill and clean up."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(private, ignore_errors=True)


def _user_config_home() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    auth: tuple[str, str]


class ServerProcess:
    """One running ``opencode serve``; :meth:`stop` is idempotent."""

    def __init__(
        self, binary: str, data_dir: Path, config: str, *, user_config: bool = False
    ) -> None:
        """``config`` is the text of ``opencode.json``, written into the private dir.
        ``user_config``: opencode also reads the user's own configuration folder
        (``$XDG_CONFIG_HOME/opencode``; pass-through mode resolves models there)."""
        self.user_config = user_config
        self.binary = binary
        self.data_dir = data_dir
        self.password = secrets.token_urlsafe(24)
        self.private = tempfile.mkdtemp(prefix="jarvis-opencode-")
        self.config_path = os.path.join(self.private, "opencode.json")
        descriptor = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(config)
        self.tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[int, str], ServerProcess] | None = None
        self.endpoint = Endpoint("", ("opencode", self.password))

    def environment(self) -> dict[str, str]:
        private = self.private
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": private,
            "XDG_CONFIG_HOME": _user_config_home()
            if self.user_config
            else os.path.join(private, "config"),
            "XDG_CACHE_HOME": os.path.join(private, "cache"),
            "XDG_STATE_HOME": os.path.join(private, "state"),
            "XDG_DATA_HOME": str(self.data_dir),
            "TMPDIR": private,
            "OPENCODE_CONFIG": self.config_path,
            "OPENCODE_SERVER_PASSWORD": self.password,
            **_QUIET,
        }
        return env

    async def start(self, workspace: str) -> Endpoint:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        port = free_port()
        self._proc = await asyncio.create_subprocess_exec(
            self.binary,
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(port),
            cwd=workspace,
            env=self.environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            limit=MAX_LINE,
        )
        self._finalizer = weakref.finalize(self, _kill_group, self._proc.pid, self.private)
        self._drain = asyncio.create_task(self._read_output(self._proc))
        self.endpoint = Endpoint(f"http://127.0.0.1:{port}", ("opencode", self.password))
        try:
            await asyncio.wait_for(self._healthy(), START_DEADLINE)
        except TimeoutError:
            await self.stop()
            raise ExternalRuntimeError(
                f"opencode did not become ready within {START_DEADLINE:.0f} s.",
                runtime="opencode",
                hint=self.output_hint(),
            ) from None
        except ExternalRuntimeError:
            await self.stop()
            raise
        return self.endpoint

    async def _read_output(self, proc: asyncio.subprocess.Process) -> None:
        """Drains the server's output for its whole life (a full pipe would stall it),
        keeping only the last lines for error messages."""
        stream = proc.stdout
        if stream is None:
            return
        while True:
            try:
                chunk = await stream.readline()
            except ValueError:  # a line longer than MAX_LINE: skip what is buffered
                chunk = await stream.read(MAX_LINE)
            if not chunk:
                return
            self.tail.append(chunk.decode("utf-8", "replace").rstrip()[:500])

    async def _healthy(self) -> None:
        async with httpx.AsyncClient(auth=self.endpoint.auth, timeout=2.0) as client:
            while True:
                if not self.alive:
                    raise ExternalRuntimeError(
                        "opencode exited while starting.",
                        runtime="opencode",
                        hint=self.output_hint(),
                    )
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    reply = await client.get(self.endpoint.url + "/global/health")
                    if reply.status_code == 200 and reply.json().get("healthy") is True:
                        return
                await asyncio.sleep(0.1)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def output_hint(self) -> str:
        lines = [line for line in self.tail if line]
        return "Its last output:\n" + "\n".join(lines[-10:]) if lines else ""

    def stop_now(self) -> None:
        """Kills the process group and removes the private dir without an event loop (a
        synchronous shutdown); the child is reaped by the loop's watcher or at exit."""
        if self._proc is not None:
            _kill_group(self._proc.pid, self.private)
        else:
            shutil.rmtree(self.private, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer.detach()

    async def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 5 s; the private dir removed."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if proc is not None:
            # children left in the group (npm started by opencode) go too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain
        if self._finalizer is not None:
            self._finalizer.detach()
        shutil.rmtree(self.private, ignore_errors=True)
