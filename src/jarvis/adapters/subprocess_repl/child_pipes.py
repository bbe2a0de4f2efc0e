"""Letting go of a stopped child process's output pipes.

The external runtimes (Claude Agent SDK, OpenCode, OpenHands) read their runner's output
in a drain task; once the runner is stopped, the task is cancelled and the pipes' transport
closed at once: cancelled mid-read, the transport would stay open until the garbage
collector finds it after its event loop closed (an unraisable warning).
"""

from __future__ import annotations

import asyncio
import contextlib


async def release_child_pipes(
    process: asyncio.subprocess.Process | None, drain: asyncio.Task[None] | None
) -> None:
    """Cancel ``drain`` (awaited, whatever it raised) and close ``process``'s pipes."""
    if drain is not None and not drain.done():
        drain.cancel()
    if drain is not None:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await drain
    transport = getattr(process, "_transport", None)
    if isinstance(transport, asyncio.SubprocessTransport):
        transport.close()
