"""The ``AGENTS.md`` files that apply to a working directory, read from disk.

From the working directory up, each folder is looked at for ``AGENTS.md`` and ``.git``; the
walk stops at the first folder with ``.git`` (the repository root). Without a repository
only the working directory's own file applies: a home folder's ``AGENTS.md`` is not taken
for a project's. Each file is read up to ``max_bytes`` (the rest is counted, not read); a
file that is not a regular file or not text is left out. An ``AGENTS.md`` that is a link
(to ``CLAUDE.md``, a common arrangement) is followed while it stays inside the repository
(the working directory, without one) and names no secret (``.env``, ``.aws/credentials``,
a key...): a cloned repository's link cannot put a file from elsewhere into every prompt.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from jarvis.adapters.filesystem_tools.protected import inside
from jarvis.adapters.inotify_watch import InotifyWatch, KeptReading, Read
from jarvis.application.project_instructions import FILE_NAME, InstructionFile
from jarvis.application.tools.secret_paths import secret_rule

MAX_LEVELS = 64
"""Folders looked at at most, from the working directory up."""


def _read(path: str, max_bytes: int) -> InstructionFile | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None
        data = os.read(descriptor, max_bytes)
        while len(data) < max_bytes and (more := os.read(descriptor, max_bytes - len(data))):
            data += more
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if b"\x00" in data:
        return None
    return InstructionFile(
        path=path,
        text=data.decode("utf-8", errors="replace"),
        omitted_bytes=max(0, info.st_size - len(data)),
    )


def _inside(path: str, boundary: str) -> bool:
    """Whether ``path``, its links followed, is a file inside ``boundary`` whose path there
    names no secret (the folders above the boundary are the user's own to name)."""
    real, root = os.path.realpath(path), os.path.realpath(boundary)
    if not inside(real, root):
        return False
    return secret_rule(os.path.relpath(real, root).split(os.sep)) is None


class AgentsMdFiles:
    """A ``ProjectInstructionsSource`` for the working directory ``cwd()`` at each call;
    with ``watch``, the files found are kept per working directory until one changes."""

    def __init__(
        self,
        *,
        max_bytes: int,
        cwd: Callable[[], str] = os.getcwd,
        watch: InotifyWatch | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self._cwd = cwd
        self._kept = KeptReading(self._read_from, watch)

    def __call__(self) -> list[InstructionFile]:
        try:
            start = os.path.abspath(self._cwd())
        except OSError:  # the working directory was removed
            return []
        return list(self._kept(start))

    def _read_from(self, start: str) -> Read[tuple[InstructionFile, ...]]:
        folder = start
        looked: list[str] = []
        paths: list[str] = []
        repository = False
        for _level in range(MAX_LEVELS):
            candidate = os.path.join(folder, FILE_NAME)
            git = os.path.join(folder, ".git")
            looked += (candidate, git)
            if os.path.exists(candidate):
                paths.append(candidate)
            if os.path.exists(git):
                repository = True
                break
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        if not repository:
            paths = [path for path in paths if os.path.dirname(path) == start]
        paths = [path for path in paths if _inside(path, folder if repository else start)]
        files = [_read(path, self.max_bytes) for path in reversed(paths)]
        return Read(tuple(file for file in files if file is not None), tuple(looked))
