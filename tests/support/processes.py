"""The process table, read from /proc: which processes carry a word on their command line."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(word: str) -> list[int]:
    """The pids (not zombies) whose command line has ``word`` in one of its arguments."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(word.encode() in arg for arg in argv) and state != "Z":
            found.append(int(entry.name))
    return found
