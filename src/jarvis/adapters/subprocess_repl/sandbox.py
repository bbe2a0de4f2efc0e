"""What this machine lets us use to confine the REPL worker, found once per REPL factory.

Three plans, strongest first:

* ``root``: the host runs as root and ``unshare`` works. The worker starts in fresh
  network, PID, mount (private ``/proc``), IPC and UTS namespaces, then drops to a
  throwaway user id of its own (so the process-count limit counts only its processes and
  nothing it does can touch files the host owns). The code may fork, bounded by
  ``max_processes``; every process dies with the namespace.
* ``userns``: not root, but unprivileged user namespaces are allowed: the same namespaces
  inside a new user namespace; the worker keeps the caller's user, and starting processes
  is refused by the audit hook.
* ``audit``: neither: the worker is a plain child in its own process group; network,
  starting processes and writes outside the working directory are refused by its audit
  hook (a guard inside the interpreter, weaker than a namespace).

Every plan scrubs the environment, sets resource limits and installs the audit hook.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from jarvis.domain.errors import SandboxError
from jarvis.domain.repl import ReplIsolation

NetworkMode = Literal["auto", "namespace", "audit_hook"]
"""``auto`` = the strongest plan available; ``namespace`` = a namespace plan or an error;
``audit_hook`` = the audit plan even where namespaces work (for tests and comparison)."""

_NAMESPACE_FLAGS = (
    "--net",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--ipc",
    "--uts",
)
_THROWAWAY_UID_BASE = 0x50000000
"""Throwaway user ids are drawn above this, far from real accounts and subuid ranges."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxPlan:
    """How to start a worker: the command prefix and what the worker must do itself."""

    name: Literal["root", "userns", "audit"]
    prefix: tuple[str, ...]
    throwaway_user: bool
    allow_fork: bool
    isolation: ReplIsolation

    def throwaway_ids(self) -> tuple[int, int] | tuple[None, None]:
        """A fresh (uid, gid) for one session, or (None, None) when the user is kept."""
        if not self.throwaway_user:
            return None, None
        uid = _THROWAWAY_UID_BASE + secrets.randbelow(1 << 24)
        return uid, uid


def _probe(command: list[str]) -> bool:
    try:
        completed = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0


def plan_sandbox(mode: NetworkMode = "auto") -> SandboxPlan:
    """Find the strongest plan ``mode`` allows on this machine (runs ``unshare`` once)."""
    unshare = shutil.which("unshare")
    true = shutil.which("true") or "/bin/true"
    is_root = os.geteuid() == 0
    if mode != "audit_hook" and unshare is not None:
        if is_root and _probe([unshare, *_NAMESPACE_FLAGS, "--", true]):
            return SandboxPlan(
                name="root",
                prefix=(unshare, *_NAMESPACE_FLAGS, "--"),
                throwaway_user=True,
                allow_fork=True,
                isolation=ReplIsolation(
                    network="namespace",
                    processes="pid_namespace",
                    user="a throwaway unprivileged uid per session",
                    environment_scrubbed=True,
                    writes_confined=True,
                ),
            )
        userns = (unshare, "--user", "--map-root-user", *_NAMESPACE_FLAGS)
        if not is_root and _probe([*userns, "--", true]):
            return SandboxPlan(
                name="userns",
                prefix=(*userns, "--"),
                throwaway_user=False,
                allow_fork=False,
                isolation=ReplIsolation(
                    network="namespace",
                    processes="refused",
                    user="the calling user (in a user namespace)",
                    environment_scrubbed=True,
                    writes_confined=True,
                ),
            )
    if mode == "namespace":
        raise SandboxError(
            "A network namespace for the REPL is not available on this machine.",
            hint="Run as root, allow unprivileged user namespaces, or use the audit-hook mode.",
        )
    return SandboxPlan(
        name="audit",
        prefix=(),
        throwaway_user=is_root,
        allow_fork=False,
        isolation=ReplIsolation(
            network="audit_hook",
            processes="refused",
            user="a throwaway unprivileged uid per session" if is_root else "the calling user",
            environment_scrubbed=True,
            writes_confined=True,
        ),
    )


_IMPORT_CHECK = (
    "import os,sys;os.setgroups([]);os.setgid({uid});os.setuid({uid});"
    "import json,socket,decimal,statistics,zlib;print(sys.version_info[0])"
)
"""Run as a throwaway user: can that user import the interpreter's standard library?"""


def _candidate_interpreters() -> Iterator[str]:
    seen: set[str] = set()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    names = [
        sys.executable,
        getattr(sys, "_base_executable", sys.executable),
        shutil.which(version) or "",
        f"/usr/bin/{version}",
        "/usr/bin/python3",
        "/usr/local/bin/python3",
        shutil.which("python3") or "",
    ]
    for name in names:
        if not name:
            continue
        real = os.path.realpath(name)
        if real not in seen and os.access(real, os.X_OK):
            seen.add(real)
            yield real


def choose_interpreter(plan: SandboxPlan) -> str:
    """The interpreter to run the worker with.

    With a throwaway user, the interpreter's standard library must be readable by that
    user, which a Python installed under a private home (e.g. ``/root/.pyenv``) is not; the
    first candidate that passes a real import test as a throwaway user wins. Otherwise (and
    as a last resort) the running interpreter.
    """
    own = os.path.realpath(sys.executable)
    if not plan.throwaway_user:
        return own
    uid, _ = plan.throwaway_ids()
    check = _IMPORT_CHECK.format(uid=uid)
    for candidate in _candidate_interpreters():
        if _probe([*plan.prefix, candidate, "-I", "-S", "-B", "-c", check]):
            return candidate
    return own


def scrubbed_environment(workdir: str) -> dict[str, str]:
    """The whole environment of the worker: no API keys, tokens or host paths."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
    }
