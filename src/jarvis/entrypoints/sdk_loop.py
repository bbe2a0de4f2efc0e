"""The private event loop of the SDK's synchronous methods, run in a daemon thread.

Apart from :mod:`.sdk` because it is about threads and loops, not about asking.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_END = object()


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(ready,), name="jarvis-sdk-loop", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[object, object, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if self.thread is threading.current_thread():
            raise RuntimeError("Jarvis.close() cannot run on the Jarvis loop itself.")
        with contextlib.suppress(Exception):
            self.submit(self.loop.shutdown_asyncgens()).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def blocking_pieces(
    call: Callable[[Coroutine[object, object, object]], object],
    stream: AsyncGenerator[str, None],
) -> Generator[str, None, None]:
    """``stream`` for a synchronous caller: each piece is awaited on the loop that ``call``
    runs coroutines on; stopping early (or ``close()``) closes the stream there too, unless
    that loop is gone (then ``call`` raises ``RuntimeError``, and there is nothing to close)."""

    async def next_piece() -> object:
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return _END

    try:
        while (piece := call(next_piece())) is not _END:
            assert isinstance(piece, str)
            yield piece
    finally:
        with contextlib.suppress(RuntimeError):
            call(stream.aclose())
