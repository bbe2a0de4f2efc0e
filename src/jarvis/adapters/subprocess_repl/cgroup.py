"""A control group per session, where the host may create one (root): the memory and the
process count of the whole session, forks included, rather than of each process.

``RLIMIT_AS`` bounds one process; forty forks of a 512 MB process hold 20 GB. A memory
cgroup bounds their sum (the private ``/tmp`` included: tmpfs pages are charged to it)
and a pids cgroup their number. Both cgroup v1 (one hierarchy per controller) and v2
(one unified hierarchy, where the controllers are enabled for our own group's children)
are handled; the session's group is a child of the host's own group, so any limit the
host is under still applies.

The worker's processes are moved into the group after they are spawned and before the
``setup`` message lets any code run: every process they start later inherits it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """Where session groups are made: one parent directory per controller used."""

    memory: Path
    pids: Path
    unified: bool

    def describe(self) -> str:
        return "cgroup v2" if self.unified else "cgroup v1"


def _own_groups() -> dict[str, str]:
    """Controller (``""`` for the unified hierarchy) -> the host's own group path."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                groups[controller] = path
    return groups


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def find_layout() -> CgroupLayout | None:
    """The cgroup layout the host can create session groups in, or ``None``.

    Root may make groups below its own. An ordinary user may only where its own group was
    delegated to it (made writable, e.g. by ``systemd-run --user --scope -p Delegate=yes``
    or an administrator); that is checked by making one group, limiting it and moving a
    short-lived process into it. Without it the session's memory is sampled instead
    (``memory_watch.py``)."""
    layout = _candidate_layout()
    if layout is None or os.geteuid() == 0:
        return layout
    return layout if _usable(layout) else None


def _usable(layout: CgroupLayout) -> bool:
    """Can this user create, limit, join and remove a session group of ``layout``?"""
    import subprocess

    group = SessionCgroup(layout)
    try:
        group.create(memory_bytes=64 * 1024 * 1024, max_processes=4)
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", "import time; time.sleep(5)"],
            stdin=subprocess.DEVNULL,
        )
        try:
            group.adopt_tree(child.pid)
            moved = child.pid in group.members()
        finally:
            child.kill()
            child.wait()
    except OSError:
        moved = False
    with contextlib.suppress(OSError):
        group.remove()
    return moved


def _candidate_layout() -> CgroupLayout | None:
    groups = _own_groups()
    memory = _ROOT / "memory" / groups.get("memory", "/").lstrip("/")
    pids = _ROOT / "pids" / groups.get("pids", "/").lstrip("/")
    v1 = (_ROOT / "memory" / "memory.usage_in_bytes").exists() and (
        _ROOT / "pids" / "cgroup.procs"
    ).exists()
    if v1 and _writable_dir(memory) and _writable_dir(pids):
        return CgroupLayout(memory=memory, pids=pids, unified=False)
    own = groups.get("")
    if own is not None and (_ROOT / "cgroup.controllers").exists():
        parent = _ROOT / own.lstrip("/")
        control = parent / "cgroup.subtree_control"
        try:
            enabled = control.read_text().split()
        except OSError:
            return None
        if {"memory", "pids"} <= set(enabled) and _writable_dir(parent):
            return CgroupLayout(memory=parent, pids=parent, unified=True)
    return None


class SessionCgroup:
    """The group(s) of one session: limits, membership, kill, removal."""

    def __init__(self, layout: CgroupLayout) -> None:
        name = f"jarvis-repl-{os.getpid()}-{secrets.token_hex(6)}"
        self.layout = layout
        self.directories: tuple[Path, ...] = tuple(
            dict.fromkeys((layout.memory / name, layout.pids / name))
        )

    @property
    def memory(self) -> Path:
        return self.directories[0]

    @property
    def pids(self) -> Path:
        return self.directories[-1]

    def create(self, *, memory_bytes: int, max_processes: int) -> None:
        """Make the group(s) and set the limits (raises ``OSError`` when the kernel refuses)."""
        for directory in self.directories:
            directory.mkdir(mode=0o755)
        if self.layout.unified:
            (self.memory / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (self.memory / "memory.swap.max").write_text("0")
        else:
            (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # absent without swap accounting
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (self.pids / "pids.max").write_text(str(max_processes))

    def adopt_tree(self, pid: int) -> list[int]:
        """Move ``pid`` and all its descendants into the group(s); returns them.

        Each process is moved before its children are listed, so a child forked meanwhile
        either appears in the list or was born inside the group already.
        """
        moved: list[int] = []
        pending = [pid]
        while pending:
            current = pending.pop()
            try:
                for directory in self.directories:
                    (directory / "cgroup.procs").write_text(str(current))
            except ProcessLookupError:
                continue
            except OSError as exc:
                if exc.errno == 3:  # ESRCH: already gone
                    continue
                raise
            moved.append(current)
            pending.extend(_children(current))
        return moved

    def members(self) -> list[int]:
        found: set[int] = set()
        for directory in self.directories:
            with contextlib.suppress(OSError):
                found.update(int(n) for n in (directory / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill_all(self, timeout: float = 5.0) -> bool:
        """SIGKILL every member until none is left; True when the group is empty."""
        deadline = time.monotonic() + timeout
        if self.layout.unified:
            with contextlib.suppress(OSError):
                (self.memory / "cgroup.kill").write_text("1")
        while True:
            members = self.members()
            if not members:
                return True
            for pid in members:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill what is left and remove the group(s); raises ``OSError`` when that fails."""
        self.kill_all()
        for directory in self.directories:
            for _ in range(500):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)  # EBUSY while the last members are being reaped
            else:
                directory.rmdir()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found.extend(int(n) for n in (task / "children").read_text().split())
    return found
