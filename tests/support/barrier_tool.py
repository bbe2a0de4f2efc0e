"""A tool body whose calls prove they ran concurrently: none ends before ``count`` have
started (run one after the other, the first would wait until its bound and fail), and each
then sleeps its ``delay``, so they end in another order than they were called."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from jarvis.domain.json_types import JSONObject


def barrier_sleeper(count: int, prefix: str) -> Callable[[JSONObject], Awaitable[str]]:
    """The body: answers ``"{prefix} {delay}"``."""
    running = 0
    all_running = asyncio.Event()

    async def sleepy(arguments: JSONObject) -> str:
        nonlocal running
        delay = arguments["delay"]
        assert isinstance(delay, float)
        running += 1
        if running == count:
            all_running.set()
        await asyncio.wait_for(all_running.wait(), 60)
        await asyncio.sleep(delay)
        return f"{prefix} {delay}"

    return sleepy
