"""One server's ``/event`` stream for one directory, opened once and shared by every run.

Opening ``GET /event`` for each run cost an ask a connection and opencode's subscription
(~20 ms); kept open, the stream is read by one task that hands each event to the run of
its session. A run subscribes before it sends its prompt and waits until the stream is
confirmed open (its first line, ``server.connected``, was read), so no event of the run
can be missed. When the stream ends (opencode closed it, or died) every run on it is told
:data:`LOST` and goes on without events; the next subscriber opens a new stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Final

import httpx

from jarvis.adapters.opencode_server.wire import MAX_EVENT_LINE, session_of


class Signal:
    """A word put in a run's queue among the events."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


LOST: Final = Signal("LOST")
"""Put in a run's queue when the stream it was subscribed to has ended."""

Item = object
"""A parsed event (a JSON value, read defensively by ``RunState.feed``) or a
:class:`Signal`."""


class StreamClosedError(Exception):
    """The stream could not be opened: ``status`` is opencode's HTTP status (0 when it
    ended before its first line), ``text`` the start of its answer."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.text = text


class EventStream:
    """The shared ``GET /event?directory=...`` of one server's client."""

    def __init__(self, client: httpx.AsyncClient, directory: str) -> None:
        self._client = client
        self._directory = directory
        self._runs: dict[str, set[asyncio.Queue[Item]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    def is_open(self) -> bool:
        """Whether the stream is read now (confirmed open and not ended)."""
        ready = self._ready
        return (
            self._task is not None
            and not self._task.done()
            and ready is not None
            and ready.done()
            and ready.exception() is None
        )

    @property
    def subscribers(self) -> int:
        """The runs reading the stream now."""
        return sum(len(queues) for queues in self._runs.values())

    async def subscribe(self, session_id: str) -> asyncio.Queue[Item]:
        """A queue that gets every event of ``session_id`` from now on, once the stream is
        confirmed open; raises ``httpx.HTTPError`` or :class:`StreamClosedError` if it
        cannot be opened. :meth:`unsubscribe` it when done."""
        if self._task is None or self._task.done():
            self._ready = asyncio.get_running_loop().create_future()
            self._ready.add_done_callback(_retrieved)
            self._task = asyncio.create_task(self._read(self._ready))
        ready = self._ready
        assert ready is not None
        queue: asyncio.Queue[Item] = asyncio.Queue()
        self._runs.setdefault(session_id, set()).add(queue)  # before the stream is read on
        try:
            await asyncio.shield(ready)
        except BaseException:
            self.unsubscribe(session_id, queue)
            raise
        return queue

    def unsubscribe(self, session_id: str, queue: asyncio.Queue[Item]) -> None:
        queues = self._runs.get(session_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._runs[session_id]

    async def _read(self, ready: asyncio.Future[None]) -> None:
        """Reads the stream until it ends, then tells every subscribed run it was lost."""
        try:
            async with self._client.stream(
                "GET", "/event", params={"directory": self._directory}
            ) as stream:
                if stream.status_code >= 400:
                    await stream.aread()
                    raise StreamClosedError(stream.status_code, stream.text[:300])
                async for line in stream.aiter_lines():
                    if not ready.done():
                        ready.set_result(None)  # the first line: the stream is open
                    if line.startswith("data:") and len(line) <= MAX_EVENT_LINE:
                        self._dispatch(line[5:])
            if not ready.done():
                ready.set_exception(StreamClosedError(0, "the stream ended at once"))
        except (httpx.HTTPError, StreamClosedError) as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if not ready.done():  # cancelled before it opened
                ready.cancel()
            runs, self._runs = self._runs, {}
            for queues in runs.values():
                for queue in queues:
                    queue.put_nowait(LOST)

    def _dispatch(self, data: str) -> None:
        try:
            event: object = json.loads(data)
        except ValueError:
            return
        for queue in self._runs.get(session_of(event), ()):
            queue.put_nowait(event)

    async def aclose(self) -> None:
        """Stops reading; the runs still subscribed are told :data:`LOST`."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def cancel(self) -> None:
        """Stops reading without waiting (synchronous code; its event loop may be gone,
        and the socket with it)."""
        task = self._task
        if task is not None and not task.done() and not task.get_loop().is_closed():
            task.cancel()


def _retrieved(ready: asyncio.Future[None]) -> None:
    """Marks a failed opening as seen: its subscribers may all have been cancelled."""
    if not ready.cancelled():
        ready.exception()


MAX_STREAMS = 8
"""Event streams (directories) one server's client keeps open at once."""


class ServerConnection:
    """One server's HTTP client, kept alive across runs (a client's creation alone cost
    20-40 ms, its TLS context included), and its event streams, one per directory."""

    def __init__(self, url: str, auth: tuple[str, str]) -> None:
        self.loop = asyncio.get_running_loop()
        """The event loop its client and streams belong to (made on it, usable on no other)."""
        self.client = httpx.AsyncClient(
            base_url=url, auth=auth, timeout=httpx.Timeout(30.0, read=None)
        )
        self._streams: dict[str, EventStream] = {}

    def events(self, directory: str) -> EventStream:
        """The event stream of ``directory`` (opened by its first subscriber). Past
        :data:`MAX_STREAMS` directories (an unjailed server serves any), the least
        recently used streams nobody reads are stopped."""
        stream = self._streams.pop(directory, None)
        if stream is None:
            stream = EventStream(self.client, directory)
            for other in list(self._streams):
                if len(self._streams) < MAX_STREAMS:
                    break
                if not self._streams[other].subscribers:
                    self._streams.pop(other).cancel()
        self._streams[directory] = stream  # now the most recently used
        return stream

    async def aclose(self) -> None:
        for stream in self._streams.values():
            await stream.aclose()
        self._streams.clear()
        await self.client.aclose()

    def close_now(self) -> None:
        """From synchronous code: stops the readers; the sockets close with the server."""
        for stream in self._streams.values():
            stream.cancel()
        self._streams.clear()
