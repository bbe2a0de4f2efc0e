"""The pinned opencode binary for the tests: skip when it is not installed, unless CI=true
(then a missing runtime fails loudly: scripts/lib/install.sh installs it)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from jarvis.adapters.opencode_server import OpenCodeRuntime, opencode_binary


def require_opencode() -> str:
    binary = opencode_binary()
    if binary is not None:
        return binary
    reason = "opencode is not installed (scripts/lib/install.sh ensure_agent_runtimes)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)


@asynccontextmanager
async def opencode_runtime(folder: Path) -> AsyncIterator[OpenCodeRuntime]:
    """A runtime on the pinned binary, its data in ``folder``, closed (its server stopped)
    when the block ends."""
    opened = OpenCodeRuntime(data_dir=folder / "data", binary=require_opencode())
    try:
        yield opened
    finally:
        await opened.aclose()


def opencode_processes(home: str | Path | None = None) -> list[int]:
    """Every live process running an opencode binary for this test (the tests count them):
    its private HOME starts with ``home``, by default the test's own temp dir's
    ``jarvis-opencode-`` (other processes on the machine may run opencode meanwhile)."""
    import tempfile

    if home is None:
        home = f"{tempfile.gettempdir()}/jarvis-opencode-"
    marker = f"HOME={home}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if not (cmdline and cmdline[0].endswith(b"/opencode")):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            if not any(e.startswith(marker) for e in environ):
                continue
        except OSError:
            continue
        pids.append(int(entry.name))
    return pids


def private_dirs(tmp: str | None = None) -> list[str]:
    """The server's private temp dirs left in the temp dir."""
    import tempfile

    base = Path(tmp or tempfile.gettempdir())
    return sorted(p.name for p in base.glob("jarvis-opencode-*"))
