"""Which failures of an engine's answer are tried again, on each wire, over real sockets.

A connection that breaks before the answer is complete (most often a pooled keep-alive
connection the engine closed while it sat idle, or an engine that closed it on reading the
request) is retried; an answer that came but is malformed never is: the engine received
the request and answered it, and asking again would only cost it (an inference) again.

The engine here is a few lines of asyncio on a loopback port that reads every request
whole and counts it, then does what the test scripted for that connection. It waits for
the client (its next request, its hanging up), and the tests wait for it, never for a
clock; ``GUARD`` only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from jarvis.adapters.inference._http import EngineHttp, RetryPolicy
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.errors import EngineProtocolError, EngineUnavailableError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message

pytestmark = pytest.mark.integration

GUARD = 30.0
MIB = 1024 * 1024
BODY = b'{"ok":true}'
OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
QUESTION: JSONObject = {
    "model": "m",
    "messages": [{"role": "user", "content": "Capital of France?"}],
}
PATH = "/v1/chat/completions"


class Peer:
    """One connection the engine accepted."""

    def __init__(
        self, engine: CountingEngine, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.engine = engine
        self.reader = reader
        self.writer = writer

    async def request(self) -> bool:
        """Read the next request whole and count it; False once the client hung up."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        length = re.search(rb"(?im)^content-length: *(\d+)\r$", head)
        await self.reader.readexactly(int(length[1]) if length else 0)
        self.engine.requests += 1
        self.engine.changed()
        return True

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP reset, not a polite close."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Script = Callable[[Peer], Awaitable[None]]


class CountingEngine:
    """A loopback engine: its n-th connection is served by the n-th script (the last one
    serves every later connection); it counts the requests it read and its connections."""

    def __init__(self, *scripts: Script) -> None:
        self._scripts = scripts
        self.requests = 0
        self.connections = 0
        self.open = 0
        self._changed = asyncio.Event()
        self._serving: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._server: asyncio.Server | None = None
        self.url = ""

    def changed(self) -> None:
        self._changed.set()

    async def until(self, test: Callable[[], bool]) -> None:
        async with asyncio.timeout(GUARD):
            while not test():
                self._changed.clear()
                await self._changed.wait()

    async def hung_up(self) -> None:
        """Until every connection is closed (by the client or by the script)."""
        await self.until(lambda: self.open == 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving[task] = writer
        self.connections += 1
        self.open += 1
        script = self._scripts[min(self.connections, len(self._scripts)) - 1]
        try:
            await script(Peer(self, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.open -= 1
            self.changed()
            del self._serving[task]

    async def __aenter__(self) -> CountingEngine:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._serving.values():
            writer.transport.abort()
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*self._serving)


def answering(answer: bytes) -> Script:
    """Every request on the connection gets ``answer``, until the client hangs up."""

    async def serve(peer: Peer) -> None:
        while await peer.request():
            await peer.send(answer)

    return serve


async def dropping(peer: Peer) -> None:
    """The request is read, and the connection closed without a byte of an answer."""
    await peer.request()


async def resetting(peer: Peer) -> None:
    """The request is read, and the connection reset without a byte of an answer."""
    await peer.request()
    peer.reset()


async def answering_once_then_dropping(peer: Peer) -> None:
    """The first request is answered on a kept-alive connection; the next one on it is
    read, and the connection closed without a byte (an idle connection the engine closed
    as the request came)."""
    await peer.request()
    await peer.send(OK)
    await peer.request()


async def answering_once_then_closing(peer: Peer) -> None:
    """The first request is answered, and then the idle connection closed."""
    await peer.request()
    await peer.send(OK)


def client(engine: CountingEngine, wire: EngineTransport, *, retries: int) -> EngineHttp:
    """An engine client: its backoff is short, so retries after the first (which goes at
    once) cost the test next to nothing."""
    return EngineHttp(
        engine_id="counted",
        base_url=engine.url,
        start_hint="Start it.",
        timeout=GUARD,
        retry=RetryPolicy(max_retries=retries, backoff=0.01, backoff_cap=0.01),
        wire=wire,
    )


Talk = Callable[..., Awaitable[tuple[CountingEngine, EngineHttp]]]
"""Starts an engine served by the scripts given, and a client of it with ``retries``."""


@pytest.fixture
async def talk(engine_wire: EngineTransport) -> AsyncIterator[Talk]:
    """Engines and their clients (on the wire of the test), all closed when it ends."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(*scripts: Script, retries: int = 2) -> tuple[CountingEngine, EngineHttp]:
            engine = await stack.enter_async_context(CountingEngine(*scripts))
            http = client(engine, engine_wire, retries=retries)
            stack.push_async_callback(http.aclose)
            return engine, http

        yield start


async def ask(http: EngineHttp, *, streamed: bool) -> bytes:
    """POST a question and read the whole answer: in one piece, or as a stream."""
    async with asyncio.timeout(GUARD):
        if not streamed:
            return (await http.request("POST", PATH, json=QUESTION)).body
        response = await http.open("POST", PATH, json=QUESTION)
        whole = False
        try:
            lines = http.lines(response, deadline=http.deadline(), max_bytes=MIB)
            text = "".join([line async for line in lines])
            whole = True
        finally:  # kept alive when it was read to the end
            await http.release(response, reusable=whole)
        return text.encode()


# --- a malformed answer: one request, and the protocol error ----------------------------

STATUS = b"HTTP/1.1 200 OK\r\n"
SECRET = b"http://admin:Hunter2Secret@db.internal/"
"""A URL with credentials, quoted back by a wire that quotes the bytes it refused."""
MALFORMED = {
    "garbage": b"garbage, not HTTP\r\n\r\n",
    "oversize-head": STATUS + b"X-Long: " + b"a" * (256 * 1024) + b"\r\n" + OK[len(STATUS) :],
    "switching-protocols": (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    ),
    "invalid-header-line": STATUS + b"Echo " + SECRET + b"\r\n" + OK[len(STATUS) :],
    "invalid-length": STATUS + b"Content-Length: eleven\r\n\r\n" + BODY,
    "invalid-chunk": STATUS + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + BODY + b"\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_answer_is_a_protocol_error_at_once_and_never_asked_again(
    talk: Talk, answer: bytes, streamed: bool
) -> None:
    engine, http = await talk(answering(answer), retries=2)
    with pytest.raises(EngineProtocolError, match="malformed HTTP answer") as raised:
        await ask(http, streamed=streamed)
    await engine.hung_up()  # the client gave the connection up, and sent nothing more
    assert (engine.requests, engine.connections) == (1, 1)
    assert len(raised.value.message) < 400  # the engine's bytes are quoted cut...
    assert "Hunter2Secret" not in raised.value.message  # ...and masked


async def test_an_adapter_reports_a_malformed_answer_as_a_protocol_error(
    engine_wire: EngineTransport,
) -> None:
    async with CountingEngine(answering(MALFORMED["garbage"])) as engine:
        adapter = OpenAICompatibleEngine(engine.url + "/v1", wire=engine_wire, max_retries=2)
        request = InferenceRequest(messages=(Message.user("Capital of France?"),), model="m")
        try:
            with pytest.raises(EngineProtocolError, match="malformed HTTP answer"):
                await asyncio.wait_for(adapter.generate(request), GUARD)
        finally:
            await adapter.aclose()
        await engine.hung_up()
        assert engine.requests == 1


# --- a broken connection: tried again ----------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_an_idle_connection_the_engine_closed_costs_nothing(
    talk: Talk, streamed: bool
) -> None:
    engine, http = await talk(answering_once_then_closing, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    await engine.hung_up()  # the engine closed the idle connection
    assert await ask(http, streamed=streamed) == BODY
    assert (engine.requests, engine.connections) == (2, 2)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_kept_alive_connection_dropped_as_the_request_came_is_retried(
    talk: Talk, streamed: bool
) -> None:
    engine, http = await talk(answering_once_then_dropping, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    assert await ask(http, streamed=streamed) == BODY  # sent again, on a new connection
    assert (engine.requests, engine.connections) == (3, 2)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("script", [dropping, resetting], ids=["closed", "reset"])
async def test_a_connection_broken_before_a_byte_of_the_answer_is_retried(
    talk: Talk, script: Script, streamed: bool
) -> None:
    engine, http = await talk(script, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    assert (engine.requests, engine.connections) == (2, 2)


@pytest.mark.parametrize("retries", [0, 1, 2])
@pytest.mark.parametrize("script", [dropping, resetting], ids=["closed", "reset"])
async def test_connections_broken_again_and_again_count_against_max_retries(
    talk: Talk, script: Script, retries: int
) -> None:
    engine, http = await talk(script, retries=retries)
    with pytest.raises(EngineUnavailableError, match="Cannot reach the counted engine"):
        await ask(http, streamed=False)
    await engine.hung_up()
    assert (engine.requests, engine.connections) == (1 + retries, 1 + retries)
