"""The pinned openhands venv for the tests: skip when it is not installed, unless CI=true
(then a missing runtime fails loudly: scripts/lib/install.sh installs it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from jarvis.adapters.openhands_sdk.interpreter import pinned_python
from tests.support.own_temp import own_temp_dir

__all__ = ["own_temp_dir"]


def require_openhands() -> str:
    python = pinned_python(dict(os.environ))
    if os.access(python, os.X_OK):
        return str(python)
    reason = f"the openhands venv is not installed at {python} (scripts/lib/install.sh)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)


def openhands_processes() -> list[int]:
    """Every live process of a runner: the runner itself and whatever it started (its
    terminal's shell and commands), found by the private HOME they all inherit."""
    # this test's runners only: their private dirs are in this test's own temp dir
    home = f"HOME={tempfile.gettempdir()}/jarvis-openhands-".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(home) for e in environ):
            pids.append(int(entry.name))
    return pids


def private_dirs(tmp: str | None = None) -> list[str]:
    """The runners' private temp dirs left in the temp dir."""
    base = Path(tmp or tempfile.gettempdir())
    return sorted(p.name for p in base.glob("jarvis-openhands-*"))


def command_processes(argv: bytes) -> list[int]:
    """The runners' processes whose command line is ``argv`` (NUL-separated)."""
    found = []
    for pid in openhands_processes():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0")
        except OSError:
            continue
        if cmdline == argv:
            found.append(pid)
    return found


def wait_for_command(argv: bytes, seconds: float = 120.0) -> list[int]:
    """Waits until a runner's tool runs ``argv`` (the condition, not a guess of time)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := command_processes(argv):
            return found
        time.sleep(0.1)
    raise AssertionError(f"no runner ran {argv!r} within {seconds:g} s")
