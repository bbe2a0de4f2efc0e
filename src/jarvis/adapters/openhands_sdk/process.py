"""One runner process: the 3.12 interpreter running ``runner_script.py`` as a file, in a
private environment, in a process group of its own, its output drained and bounded.

The environment holds only PATH, LANG, a private HOME and TMPDIR (a temporary directory
removed when the run ends: the SDK's terminal writes a shell history there) and the
SDK's persistence dir in jarvis's config dir (conversations continue across runs); none
of the user's variables, so no key or tracing endpoint reaches the SDK.

Stopping kills the whole tree, not just the runner's process group: the SDK's terminal
tool starts its shell in a session of its own (``setsid``), so its shell and commands are
found by walking the runner's descendants and, for those already orphaned (a runner that
crashed), by the private HOME every one of them inherits. The parent-death signal kills
the runner even if jarvis itself is killed.

The runner runs in a bubblewrap jail (``subprocess_repl/process_jail.py``): the SDK's
terminal and file editor can write only the workspace, the private dir and the
conversations' dir, and see neither the home directory nor jarvis's config dir; the
jail's PID namespace dies with jarvis, even of ``SIGKILL``, with every process in it (a
``setsid nohup`` command too). The private dir is registered with a reaper process (the
REPL's ``janitor``) that removes it when jarvis dies. Unjailed (the user's opt-out), a
command running when jarvis is killed can outlive it.
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
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from pathlib import Path

from jarvis.adapters.openhands_sdk.wire import MAX_LINE
from jarvis.adapters.subprocess_repl.bwrap import interpreter_root
from jarvis.adapters.subprocess_repl.child_pipes import release_child_pipes
from jarvis.adapters.subprocess_repl.janitor import Janitor, forget_removed
from jarvis.adapters.subprocess_repl.process_jail import (
    Confinement,
    ProcessJail,
    kill_tree,
    parent_of,
    with_descendants,
)

RUNNER = Path(__file__).with_name("runner_script.py")
OUTPUT_TAIL_LINES = 40
MAX_STDERR_LINE = 2_000
STOP_GRACE = 3.0
"""Seconds to wait for the runner's stderr to end after it exited."""


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when jarvis dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


MAX_ENVIRON = 1_048_576


async def _lines(stream: asyncio.StreamReader | None) -> AsyncIterator[str]:
    """A pipe of the runner's, line by line until it ends; a line over :data:`MAX_LINE`
    is skipped (asyncio dropped it)."""
    while stream is not None:
        try:
            chunk = await stream.readline()
        except ValueError:
            continue
        if not chunk:
            return
        yield chunk.decode("utf-8", "replace")


def _has_home(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read(MAX_ENVIRON)
    except OSError:
        return False
    return marker in b"\0" + environ


def runner_tree(root: int | None, private: str) -> set[int]:
    """``root`` (the runner, while it is ours), its descendants, and every process whose
    HOME is the run's private dir, with theirs."""
    marker = b"\0HOME=" + private.encode() + b"\0"
    children: defaultdict[int, list[int]] = defaultdict(list)
    pending: list[int] = [] if root is None else [root]
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            parent = parent_of(pid)
            if parent is not None:
                children[parent].append(pid)
            if _has_home(pid, marker):
                pending.append(pid)
    tree = with_descendants(pending, children)
    tree.discard(os.getpid())
    return tree


def _kill_tree(root: int | None, private: str) -> None:
    """Stops the tree first (nothing in it can fork a new member), kills it, and waits for
    it to exit. ``root`` is ``None`` once the runner is reaped (its pid may be someone
    else's now)."""
    tree = runner_tree(root, private)
    for member in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGSTOP)
    if root is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)
    kill_tree(tree)


def remove_private(private: str) -> None:
    """Remove the run's private dir, also when the agent's tools left a folder there
    without write permission (``chmod 500``: its entries could not be unlinked, and a
    plain ``rmtree`` would leave them behind silently). Such a folder is made writable
    again; only where permissions bind (not as root, who needs no such change and whose
    ``chmod`` through a link swapped in meanwhile could reach any file of the host)."""

    def unlock(function: object, name: str, _error: object) -> None:
        del function
        if os.geteuid() == 0:
            return
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)  # the user's own folder, in its tree
        with contextlib.suppress(OSError):
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, 0o700)
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    for _ in range(3):  # a folder opened up may show entries the first pass could not see
        shutil.rmtree(private, onerror=unlock)  # fd-based: no link is followed
        if not os.path.lexists(private):
            return


def _kill_group(pid: int | None, private: str) -> None:
    _kill_tree(pid, private)
    remove_private(private)


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

    def __init__(
        self,
        python: str,
        persistence_dir: Path,
        *,
        confinement: Confinement | None = None,
        janitor: Janitor | None = None,
    ) -> None:
        """``janitor`` removes the private dir if jarvis dies before :meth:`stop`."""
        self.python = python
        self.persistence_dir = persistence_dir
        self.confinement = confinement or Confinement("openhands", enabled=False)
        self.janitor = janitor
        self.private = tempfile.mkdtemp(prefix="jarvis-openhands-")
        if janitor is not None:
            janitor.add_directory(self.private)
        self.tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[int | None, str], RunnerProcess] | None = None

    def _readable(self) -> list[str]:
        """What the jailed runner reads where it may be hidden: its venv, the interpreter
        the venv was made from, and the runner script."""
        venv = os.path.dirname(os.path.dirname(os.path.abspath(self.python)))
        base = interpreter_root(self.python)
        return [venv, *([base] if base else []), str(RUNNER)]

    async def start(
        self, request_json: bytes, workspace: str, jail: ProcessJail | None = None
    ) -> None:
        """Spawns the runner (jailed to ``workspace`` by ``jail``, when given) and hands it
        the request (then closes its stdin)."""
        argv = [
            self.python,
            "-I",  # no user site, no PYTHON* variables, not the script's dir on sys.path
            str(RUNNER),
        ]
        self._proc = await asyncio.create_subprocess_exec(
            *self.confinement.wrap(
                jail,
                argv,
                workdir=workspace,
                writable=[workspace, self.private, str(self.persistence_dir)],
                readable=self._readable(),
            ),
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
        async for line in _lines(None if self._proc is None else self._proc.stdout):
            yield line

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Drains stderr for the whole run (a full pipe would stall the SDK), keeping only
        the last lines for error messages."""
        async for line in _lines(proc.stderr):
            self.tail.append(line.rstrip()[:MAX_STDERR_LINE])

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

    def _live_pid(self) -> int | None:
        """The runner's pid while it is not reaped (until then no one else can have it)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    def output_hint(self) -> str:
        lines = [line for line in self.tail if line.strip()]
        return "Its last output:\n" + "\n".join(lines[-10:]) if lines else ""

    def stop_now(self) -> None:
        """Kills the group and removes the private dir, without an event loop."""
        _kill_group(self._live_pid(), self.private)
        self._disown()

    async def stop(self) -> None:
        """Kills the whole tree (see the module's docstring) and reaps the runner; the
        private dir removed. A runner that already exited may have left an orphan: it is
        found by its HOME."""
        proc = self._proc
        await asyncio.to_thread(_kill_tree, self._live_pid(), self.private)
        if proc is not None:
            await proc.wait()
        await release_child_pipes(proc, self._drain)
        await asyncio.to_thread(remove_private, self.private)
        self._disown()

    def _disown(self) -> None:
        """The tree is gone and the private dir removed: nothing left for the finalizer
        or the reaper to do."""
        if self._finalizer is not None:
            self._finalizer.detach()
        forget_removed(self.janitor, self.private)
