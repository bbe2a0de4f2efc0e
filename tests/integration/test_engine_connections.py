"""What happens to pooled keep-alive connections after a stream, over real loopback sockets.

The server here is a few lines of asyncio that speaks just enough HTTP/1.1 to count its
connections and to behave like llama.cpp's server after a stream it cut short: it ends that
response in good HTTP order, without ``[DONE]``, and then drops the connection when the next
request arrives on it. A client that put such a connection back into its pool would send
its next request into the void.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.errors import EngineProtocolError, EngineUnavailableError
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message

pytestmark = pytest.mark.integration

COMPLETION = {
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def _event(data: str) -> bytes:
    payload = f"data: {data}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _delta(text: str, finish: str | None = None) -> str:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return json.dumps({"model": "m", "choices": [choice]})


class CuttingServer:
    """Answers ``model: "cut"`` streams with one event and no end, and drops the connection
    at the next request after such a stream or after a ``model: "stale"`` answer;
    ``model: "linger"`` streams get their ``[DONE]`` but their body never ends."""

    def __init__(self) -> None:
        self.connections = 0
        self.dropped = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> CuttingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        poisoned = False
        try:
            while True:
                if not await reader.readline():
                    return
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length))
                if poisoned:
                    self.dropped += 1
                    return  # closes the connection without a word, like llama.cpp's server
                if body.get("stream"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n"
                    )
                    if body.get("model") == "cut":
                        writer.write(_event(_delta("Par")) + b"0\r\n\r\n")
                        poisoned = True
                    elif body.get("model") == "linger":  # [DONE], then the body never ends
                        writer.write(_event(_delta("Paris", "stop")) + _event("[DONE]"))
                        await writer.drain()
                        await reader.read()  # until the client hangs up
                        return
                    else:
                        writer.write(
                            _event(_delta("Paris", "stop")) + _event("[DONE]") + b"0\r\n\r\n"
                        )
                else:
                    poisoned = body.get("model") == "stale"
                    payload = json.dumps(COMPLETION).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(payload)}\r\n\r\n".encode()
                        + payload
                    )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[CuttingServer]:
    async with CuttingServer() as running:
        yield running


def _request(model: str = "m") -> InferenceRequest:
    return InferenceRequest(messages=(Message.user("Capital of France?"),), model=model)


async def test_streams_that_end_in_good_order_keep_their_connection(
    engine_wire: EngineTransport, server: CuttingServer
) -> None:
    engine = OpenAICompatibleEngine(server.url, wire=engine_wire, max_retries=0)
    try:
        for _ in range(3):
            chunks = [chunk async for chunk in engine.stream(_request())]
            assert "".join(c.content for c in chunks) == "Paris"
        assert (await engine.generate(_request())).content == "hello"
    finally:
        await engine.aclose()
    assert server.connections == 1


async def test_a_stream_cut_short_never_hands_its_connection_to_the_next_request(
    engine_wire: EngineTransport,
    server: CuttingServer,
) -> None:
    # no retries at all: the next request must not even meet the dead connection
    engine = OpenAICompatibleEngine(server.url, wire=engine_wire, max_retries=0)
    try:
        received: list[str] = []

        async def read() -> None:
            async for chunk in engine.stream(_request("cut")):
                received.append(chunk.content)

        with pytest.raises(EngineProtocolError, match="before the answer was complete"):
            await read()
        assert received == ["Par"]  # what came is shown, but never passed off as complete
        assert (await engine.generate(_request())).content == "hello"
    finally:
        await engine.aclose()
    assert (server.connections, server.dropped) == (2, 0)


async def test_a_finished_stream_whose_body_never_ends_is_delivered_and_its_connection_dropped(
    engine_wire: EngineTransport,
    server: CuttingServer,
) -> None:
    engine = OpenAICompatibleEngine(server.url, wire=engine_wire, max_retries=0, timeout=30.0)
    try:
        started = asyncio.get_running_loop().time()
        chunks = [chunk async for chunk in engine.stream(_request("linger"))]
        assert asyncio.get_running_loop().time() - started < 5  # not the 30 s read timeout
        assert "".join(c.content for c in chunks) == "Paris"
        assert chunks[-1].finish_reason == "stop"
        assert (await engine.generate(_request())).content == "hello"
    finally:
        await engine.aclose()
    assert server.connections == 2


@pytest.mark.parametrize("retries", [0, 1])
async def test_a_pooled_connection_the_server_dropped_is_retried_at_once_on_a_new_one(
    engine_wire: EngineTransport, server: CuttingServer, retries: int
) -> None:
    # "stale": answered well, then the server drops that connection when it is used again
    engine = OpenAICompatibleEngine(server.url, wire=engine_wire, max_retries=retries, backoff=30.0)
    try:
        assert (await engine.generate(_request("stale"))).content == "hello"
        started = asyncio.get_running_loop().time()
        if retries:
            assert (await engine.generate(_request())).content == "hello"
            assert asyncio.get_running_loop().time() - started < 5  # at once, no backoff
        else:
            with pytest.raises(EngineUnavailableError, match="RemoteProtocolError"):
                await engine.generate(_request())
    finally:
        await engine.aclose()
    assert (server.connections, server.dropped) == (1 + retries, 1)
