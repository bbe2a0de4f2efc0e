"""``SlotGate``: at most N holders at once, across threads and event loops.

One runtime adapter may serve several event loops (the SDK gives each calling loop its
own), and ``asyncio.Semaphore`` belongs to one loop. This gate keeps its count under a
thread lock and wakes a waiter on the waiter's own loop; waiters are served first come,
first served. Waiting costs no thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class SlotGate:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a slot gate needs at least one slot")
        self.size = size
        self._lock = threading.Lock()
        self._free = size
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def in_use(self) -> int:
        with self._lock:
            return self.size - self._free

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] = (
                loop,
                loop.create_future(),
            )
            self._waiters.append(waiter)
        try:
            await waiter[1]
        except asyncio.CancelledError:
            with self._lock:
                if waiter in self._waiters:  # not granted yet: just leave the queue
                    self._waiters.remove(waiter)
                    raise
            if not waiter[1].cancelled():  # granted, then cancelled: give the slot back
                self.release()
            # else the grant is still on its way: _grant sees the cancelled future and
            # passes the slot on
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, future = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._grant, future)
                except RuntimeError:  # its loop is closed: the next waiter gets the slot
                    continue
                return
            self._free = min(self.size, self._free + 1)

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled meanwhile
            self.release()
        else:
            future.set_result(None)
