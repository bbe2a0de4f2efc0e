"""Stopping a stdio server and every process it started: its process group, first asked
(stdin closed), then SIGTERM, then SIGKILL, each after a grace period."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

STOP_GRACE_SECONDS = 2.0
"""How long a server may take to exit after its stdin closes, then after SIGTERM."""


async def stop_process_group(process: asyncio.subprocess.Process) -> None:
    """Close stdin, give the server a grace period, then SIGTERM and SIGKILL its whole
    process group (a child it started, like ``npx``'s node, goes too)."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    if not await _exited(process, STOP_GRACE_SECONDS):
        kill_group(process, signal.SIGTERM)
        if not await _exited(process, STOP_GRACE_SECONDS):
            kill_group(process, signal.SIGKILL)
            await _exited(process, STOP_GRACE_SECONDS)
    await kill_group_and_wait(process)  # whatever of its group is left
    # Close the pipes now: a stdout left unread (a frame refused mid-stream) would keep
    # the transport open until the garbage collector finds it, after its loop closed.
    transport = getattr(process, "_transport", None)
    if isinstance(transport, asyncio.SubprocessTransport):
        transport.close()


async def kill_group_and_wait(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group of ``process``, then wait until the kernel has taken its
    members (bounded: 1 s)."""
    kill_group(process, signal.SIGKILL)
    for _ in range(100):
        if not group_alive(process):
            break
        await asyncio.sleep(0.01)


def kill_now(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group of ``process`` from outside its event loop, and return once
    its leader has died (see :func:`wait_killed`)."""
    kill_group(process, signal.SIGKILL)
    wait_killed(process.pid)


def group_alive(process: asyncio.subprocess.Process) -> bool:
    try:
        os.killpg(process.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError:
        return False
    return True


def kill_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def wait_killed(pid: int, seconds: float = 1.0) -> None:
    """Block until the killed process ``pid`` has died (gone, or a zombie its parent's
    watcher reaps), at most ``seconds``: a signal is delivered when the process next runs,
    and on a busy machine a stop that returned at once left it running for a moment."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in (b"Z", b"X") or time.monotonic() >= deadline:
            return
        time.sleep(0.002)
