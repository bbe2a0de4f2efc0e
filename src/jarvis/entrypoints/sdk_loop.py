"""The private event loop of the SDK's synchronous methods, run in a daemon thread.

Apart from :mod:`.sdk` because it is about threads and loops, not about asking.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Generator
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


class TextStream:
    """What ``ask_stream`` returns: an iterator (``for``, ``next``, ``close()``) whose pieces
    are awaited on the instance's loop thread, and an async iterable (``async for``) that
    streams on the caller's loop instead. Each way starts its own run when first used; one
    object serves one of them."""

    def __init__(
        self,
        pieces: Callable[[], Generator[str, None, None]],
        async_pieces: Callable[[], AsyncIterator[str]],
    ) -> None:
        self._pieces = pieces
        self._async_pieces = async_pieces
        self._started: Generator[str, None, None] | AsyncIterator[str] | None = None

    def _generator(self) -> Generator[str, None, None]:
        if self._started is None:
            self._started = self._pieces()
        if not isinstance(self._started, Generator):
            raise RuntimeError("This stream is iterated with `async for` already.")
        return self._started

    def __iter__(self) -> TextStream:
        return self

    def __next__(self) -> str:
        return next(self._generator())

    def close(self) -> None:
        """Stop the run (nothing to do when it never started)."""
        if isinstance(self._started, Generator):
            self._started.close()

    def __aiter__(self) -> AsyncIterator[str]:
        if self._started is not None:
            raise RuntimeError("This stream is iterated already.")
        self._started = self._async_pieces()
        return self._started
