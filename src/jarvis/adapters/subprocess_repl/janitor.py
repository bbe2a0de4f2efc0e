"""The host's side of the reaper (see ``reaper.py``): start it once, tell it what exists.

Closing the pipe — explicitly, when the factory is garbage-collected, at interpreter exit,
or by the kernel when the host dies of a signal — makes the reaper clean up and exit.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import IO

REAPER_SCRIPT = Path(__file__).with_name("reaper.py")


def _close(stream: IO[bytes] | None, process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if stream is not None:
            stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


class Janitor:
    """Registers a factory's directories and cgroups with its reaper process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._process is None and not self._failed:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-B", str(REAPER_SCRIPT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=None,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError:
                self._failed = True  # cleanup then happens in the host only
                return None
            self._process = process
            weakref.finalize(self, _close, process.stdin, process)
        return self._process

    def _say(self, line: str) -> None:
        with self._lock:
            process = self._ensure()
            if process is None or process.stdin is None:
                return
            try:
                process.stdin.write(os.fsencode(line) + b"\n")
                process.stdin.flush()
            except OSError:
                self._failed = True

    def add_directory(self, path: str) -> None:
        self._say(f"+dir {path}")

    def remove_directory(self, path: str) -> None:
        self._say(f"-dir {path}")

    def add_cgroup(self, path: str) -> None:
        self._say(f"+cgroup {path}")

    def remove_cgroup(self, path: str) -> None:
        self._say(f"-cgroup {path}")

    def close(self) -> None:
        """Stop the reaper (it removes whatever is still registered)."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            _close(process.stdin, process)


def forget_removed(janitor: Janitor | None, path: str) -> None:
    """Tell ``janitor`` (if any) that ``path`` needs no cleaning once it is removed; a
    path still there stays registered, for the reaper to remove when jarvis dies."""
    if janitor is not None and not os.path.lexists(path):
        janitor.remove_directory(path)
