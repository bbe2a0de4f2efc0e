"""The ``opencode serve`` process: private environment, free loopback port, random password,
a real start-up deadline, its output drained, and stopped with its whole process tree.

Everything opencode writes goes into private directories: HOME, the XDG dirs and TMPDIR
are a temporary directory removed at stop (each boot leaves a 5.5 MB library in TMPDIR;
the config in it holds the engine's key), except its data dir (sessions, so
``-O session=ID`` continues across runs), which lives in jarvis's config dir. The password
is new for every server: nobody else on the machine can drive it.

The server runs in a bubblewrap jail (``subprocess_repl/process_jail.py``): it and every
command its tools run can write only the workspace, the private dir and the data dir, and
see neither the home directory nor jarvis's config dir; the jail's PID namespace dies
with jarvis, even of ``SIGKILL``, with every process in it. The private dir is registered
with a reaper process (the REPL's ``janitor``) that removes it when jarvis dies. Unjailed
(the user's opt-out), the server runs in a session of its own with the parent-death
signal set.
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

from jarvis.adapters.subprocess_repl.child_pipes import release_child_pipes
from jarvis.adapters.subprocess_repl.janitor import Janitor, forget_removed
from jarvis.adapters.subprocess_repl.process_jail import (
    Confinement,
    ProcessJail,
    kill_tree,
    process_tree,
)
from jarvis.domain.cut_text import masked_prefix
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
    """Kills the server's whole tree (jailed, the server is bubblewrap's grandchild) and
    removes the private dir; also the last resort at interpreter exit."""
    tree = process_tree(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    kill_tree(tree)
    shutil.rmtree(private, ignore_errors=True)


_USER_CONFIG_FILES = ("opencode.json", "opencode.jsonc", "config.json")
"""The files of the user's opencode configuration folder that pass-through mode reads."""
_MAX_USER_CONFIG = 1 << 20


def _user_config_home() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    auth: tuple[str, str]


class ServerProcess:
    """One running ``opencode serve``; :meth:`stop` is idempotent."""

    def __init__(
        self,
        binary: str,
        data_dir: Path,
        config: str,
        *,
        confinement: Confinement | None = None,
        janitor: Janitor | None = None,
        user_config: bool = False,
    ) -> None:
        """``config`` is the text of ``opencode.json``, written into the private dir;
        ``janitor`` removes the private dir if jarvis dies before :meth:`stop`.
        ``user_config``: opencode also reads the configuration files of the user's own
        folder (``$XDG_CONFIG_HOME/opencode``; pass-through mode resolves models there),
        copied into the private dir."""
        self.user_config = user_config
        self.binary = binary
        self.install_dir = os.path.dirname(os.path.realpath(binary))
        """What a jailed server reads besides the host's system: its binary's folder."""
        self.data_dir = data_dir
        self.confinement = confinement or Confinement("opencode", enabled=False)
        self.janitor = janitor
        self.password = secrets.token_urlsafe(24)
        self.private = tempfile.mkdtemp(prefix="jarvis-opencode-")
        if janitor is not None:
            janitor.add_directory(self.private)
        if user_config:
            self._copy_user_config()
        self.config_path = os.path.join(self.private, "opencode.json")
        descriptor = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(config)
        self.tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._proc: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop it was started on: its process can be awaited on no other."""
        self._drain: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[int, str], ServerProcess] | None = None
        self.endpoint = Endpoint("", ("opencode", self.password))
        self.jailed = False

    def environment(self) -> dict[str, str]:
        private = self.private
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": private,
            "XDG_CONFIG_HOME": os.path.join(private, "config"),
            "XDG_CACHE_HOME": os.path.join(private, "cache"),
            "XDG_STATE_HOME": os.path.join(private, "state"),
            "XDG_DATA_HOME": str(self.data_dir),
            "TMPDIR": private,
            "OPENCODE_CONFIG": self.config_path,
            "OPENCODE_SERVER_PASSWORD": self.password,
            **_QUIET,
        }
        return env

    def _copy_user_config(self) -> None:
        """Pass-through mode: the user's own opencode configuration files, copied into the
        private config dir (opencode writes into its config dir, and a jailed server sees
        nothing of the home directory; the user's folder is never written)."""
        source = os.path.join(_user_config_home(), "opencode")
        target = os.path.join(self.private, "config", "opencode")
        os.makedirs(target, mode=0o700, exist_ok=True)
        for name in _USER_CONFIG_FILES:
            path = os.path.join(source, name)
            if os.path.isfile(path) and os.path.getsize(path) <= _MAX_USER_CONFIG:
                shutil.copyfile(path, os.path.join(target, name))

    async def start(self, workspace: str, jail: ProcessJail | None = None) -> Endpoint:
        """Starts the server in ``workspace`` (jailed to it by ``jail``, when given)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        port = free_port()
        argv = [self.binary, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
        self._loop = asyncio.get_running_loop()
        self._proc = await asyncio.create_subprocess_exec(
            *self.confinement.wrap(
                jail,
                argv,
                workdir=workspace,
                writable=[workspace, self.private, str(self.data_dir)],
                readable=[self.install_dir],
            ),
            cwd=workspace,
            env=self.environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            limit=MAX_LINE,
        )
        self.jailed = jail is not None
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
            self.tail.append(masked_prefix(chunk.decode("utf-8", "replace").rstrip(), 500))

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

    def _disown(self) -> None:
        """The tree is gone and the private dir removed: nothing left for the finalizer
        or the reaper to do."""
        if self._finalizer is not None:
            self._finalizer.detach()
        forget_removed(self.janitor, self.private)

    def stop_now(self) -> None:
        """Kills the process group and removes the private dir without an event loop (a
        synchronous shutdown); the child is reaped by the loop's watcher or at exit."""
        if self._proc is not None:
            _kill_group(self._proc.pid, self.private)
            self._forget_closed_loop()
        else:
            shutil.rmtree(self.private, ignore_errors=True)
        self._disown()

    def _forget_closed_loop(self) -> None:
        """When the loop the process was started on is closed (``asyncio.run`` returned),
        asyncio's transport of the process can no longer close itself: collected later,
        it would raise "Event loop is closed" where nobody can catch it. It is marked
        closed now, the process being killed (what it fails to do on the closed loop is
        left: the pipes' descriptors close when they are collected)."""
        if self._loop is None or not self._loop.is_closed():
            return
        transport = getattr(self._proc, "_transport", None)  # asyncio's own, not typed
        if transport is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed
                transport.close()

    async def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 5 s, then SIGKILL to whatever is
        left of its tree (waited for); the private dir removed. Started on another event
        loop (an application that calls ``asyncio.run`` again: that one is closed now),
        its process cannot be awaited here: it is killed as a synchronous shutdown kills
        it (:meth:`stop_now`), its tree with it."""
        proc = self._proc
        if proc is not None and self._loop is not asyncio.get_running_loop():
            tree = set() if proc.returncode is not None else process_tree(proc.pid)
            self.stop_now()
            await asyncio.to_thread(kill_tree, tree - {proc.pid})
            return
        tree = set() if proc is None or proc.returncode is not None else process_tree(proc.pid)
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
        await asyncio.to_thread(kill_tree, tree - ({proc.pid} if proc is not None else set()))
        await release_child_pipes(proc, self._drain)
        shutil.rmtree(self.private, ignore_errors=True)
        self._disown()
