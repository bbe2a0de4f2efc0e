"""The pinned openhands venv for the tests: skip when it is not installed, unless CI=true
(then a missing runtime fails loudly: scripts/lib/install.sh installs it)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


def openhands_processes(home: str | Path | None = None) -> list[int]:
    """Every live process of a runner: the runner itself and whatever it started (its
    terminal's shell and commands), found by the private HOME they all inherit: it starts
    with ``home``, by default this test's own temp dir's ``jarvis-openhands-`` (other
    processes on the machine may run openhands meanwhile)."""
    if home is None:
        home = f"{tempfile.gettempdir()}/jarvis-openhands-"
    marker = b"HOME=" + str(home).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if not any(e.startswith(marker) for e in environ):
            continue
        if any(e.startswith(b"HOME=") and b"/jarvis-openhands-" in e for e in environ):
            pids.append(int(entry.name))
    return pids


@contextmanager
def temp_dir_in(folder: Path) -> Iterator[Path]:
    """Runners started inside make their private dirs in ``folder`` (a test's own), so
    what is left there is this test's alone."""
    folder.mkdir(exist_ok=True)
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = saved


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
