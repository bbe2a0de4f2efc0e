"""The shared ``/event`` stream against a scripted server (``httpx.MockTransport``): each
run gets its own session's events only, nothing before the stream is confirmed open, a
stream that ends tells its runs (never leaves them waiting), and the next run reopens it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from jarvis.adapters.opencode_server.events import (
    LOST,
    MAX_STREAMS,
    EventStream,
    ServerConnection,
    StreamClosedError,
)


class ScriptedStream:
    """Serves ``GET /event``: each opening gets a stream fed by :meth:`send` until
    :meth:`end`; ``status`` answers the openings instead when it is not 200."""

    def __init__(self) -> None:
        self.status = 200
        self.openings = 0
        self.requested = asyncio.Event()
        self.directories: list[str] = []
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.openings += 1
        self.requested.set()
        self.directories.append(request.url.params.get("directory", ""))
        if self.status != 200:
            return httpx.Response(self.status, text="no such directory")
        return httpx.Response(200, content=self._body())

    async def _body(self) -> AsyncIterator[bytes]:
        while (line := await self._lines.get()) is not None:
            yield line.encode()

    def send(self, event: object) -> None:
        self._lines.put_nowait(f"data: {json.dumps(event)}\n\n")

    def end(self) -> None:
        self._lines.put_nowait(None)


def delta(session: str, text: str) -> dict[str, object]:
    return {
        "type": "message.part.delta",
        "properties": {"sessionID": session, "partID": "p", "field": "text", "delta": text},
    }


CONNECTED = {"type": "server.connected", "properties": {}}


async def opened(server: ScriptedStream) -> tuple[httpx.AsyncClient, EventStream]:
    client = httpx.AsyncClient(
        base_url="http://opencode", transport=httpx.MockTransport(server.handler)
    )
    return client, EventStream(client, "/work")


async def test_each_run_gets_only_its_own_sessions_events() -> None:
    server = ScriptedStream()
    client, stream = await opened(server)
    server.send(CONNECTED)
    one, two = await asyncio.gather(stream.subscribe("ses_1"), stream.subscribe("ses_2"))
    assert server.openings == 1
    assert server.directories == ["/work"]
    server.send(delta("ses_2", "for two"))
    server.send(delta("ses_1", "for one"))
    server.send(delta("ses_3", "for nobody"))
    part = {"type": "message.part.updated", "properties": {"part": {"sessionID": "ses_1"}}}
    server.send(part)
    assert await two.get() == delta("ses_2", "for two")
    assert await one.get() == delta("ses_1", "for one")
    assert await one.get() == part
    assert two.empty()
    stream.unsubscribe("ses_1", one)
    stream.unsubscribe("ses_2", two)
    await stream.aclose()
    await client.aclose()


async def test_subscribe_returns_only_once_the_stream_is_confirmed_open() -> None:
    server = ScriptedStream()
    client, stream = await opened(server)
    subscribing = asyncio.create_task(stream.subscribe("ses_1"))
    await server.requested.wait()  # the request is made; no line is read yet
    assert not subscribing.done()
    assert not stream.is_open()
    server.send(CONNECTED)
    queue = await subscribing
    assert stream.is_open()
    server.send(delta("ses_1", "Paris"))
    assert await queue.get() == delta("ses_1", "Paris")
    await stream.aclose()
    await client.aclose()


async def test_a_stream_that_ends_tells_its_runs_and_the_next_run_reopens_it() -> None:
    server = ScriptedStream()
    client, stream = await opened(server)
    server.send(CONNECTED)
    queue = await stream.subscribe("ses_1")
    server.send(delta("ses_1", "half"))
    server.end()
    assert await queue.get() == delta("ses_1", "half")
    assert await queue.get() is LOST
    server.send(CONNECTED)
    again = await stream.subscribe("ses_1")
    assert server.openings == 2
    server.send(delta("ses_1", "whole"))
    assert await again.get() == delta("ses_1", "whole")
    await stream.aclose()
    assert await again.get() is LOST  # closed under a run: told, not left waiting
    await client.aclose()


async def test_a_stream_refused_is_an_error_for_the_subscriber() -> None:
    server = ScriptedStream()
    server.status = 403
    client, stream = await opened(server)
    with pytest.raises(StreamClosedError) as refused:
        await stream.subscribe("ses_1")
    assert refused.value.status == 403
    assert "no such directory" in refused.value.text
    server.status = 200
    server.send(CONNECTED)
    assert (await stream.subscribe("ses_1")).empty()  # the next subscriber opens it anew
    await stream.aclose()
    await client.aclose()


async def test_a_stream_ending_before_its_first_line_is_an_error_not_a_wait() -> None:
    server = ScriptedStream()
    client, stream = await opened(server)
    server.end()
    with pytest.raises(StreamClosedError):
        await stream.subscribe("ses_1")
    await stream.aclose()
    await client.aclose()


async def test_a_cancelled_subscriber_leaves_no_queue_behind() -> None:
    server = ScriptedStream()
    client, stream = await opened(server)
    subscribing = asyncio.create_task(stream.subscribe("ses_1"))
    await server.requested.wait()
    subscribing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await subscribing
    assert stream.subscribers == 0
    await stream.aclose()
    await client.aclose()


async def test_streams_of_many_directories_are_capped_sparing_those_read() -> None:
    server = ScriptedStream()
    connection = ServerConnection("http://opencode", ("opencode", "secret"))
    await connection.client.aclose()
    connection.client = httpx.AsyncClient(
        base_url="http://opencode", transport=httpx.MockTransport(server.handler)
    )
    server.send(CONNECTED)
    read = connection.events("/dir/0")
    queue = await read.subscribe("ses_1")
    idle = connection.events("/dir/1")
    for index in range(2, MAX_STREAMS + 2):
        connection.events(f"/dir/{index}")
    assert connection.events("/dir/1") is not idle  # the least recently used, stopped
    assert connection.events("/dir/0") is read  # read by a run: kept
    assert read.is_open()
    read.unsubscribe("ses_1", queue)
    await connection.aclose()
