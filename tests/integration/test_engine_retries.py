"""Which failures of an engine's answer are tried again, on each wire, over real sockets.

A connection that breaks before the answer is complete (most often a pooled keep-alive
connection the engine closed while it sat idle, or an engine that closed it on reading the
request) is retried; an answer that came but is malformed never is: the engine received
the request and answered it, and asking again would only cost it (an inference) again.

The engine here (:class:`tests.support.raw_loopback_engine.Engine`) reads every request whole
and records it, then does what the test scripted for that connection. It waits for the
client (its next request, its hanging up), and the tests wait for it, never for a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from jarvis.adapters.inference._http import EngineHttp, RetryPolicy
from jarvis.adapters.inference._wire import EngineTransport
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.errors import EngineProtocolError, EngineUnavailableError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from tests.support.raw_loopback_engine import GUARD, Engine, Handler, Link

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
BODY = b'{"ok":true}'
OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
QUESTION: JSONObject = {
    "model": "m",
    "messages": [{"role": "user", "content": "Capital of France?"}],
}
PATH = "/v1/chat/completions"


def answering(answer: bytes) -> Handler:
    """Every request on the connection gets ``answer``, until the client hangs up."""

    async def serve(link: Link) -> None:
        while await link.request():
            await link.send(answer)

    return serve


async def dropping(link: Link) -> None:
    """The request is read, and the connection closed without a byte of an answer."""
    await link.request()


async def resetting(link: Link) -> None:
    """The request is read, and the connection reset without a byte of an answer."""
    await link.request()
    link.reset()


async def answering_once_then_dropping(link: Link) -> None:
    """The first request is answered on a kept-alive connection; the next one on it is
    read, and the connection closed without a byte (an idle connection the engine closed
    as the request came)."""
    await link.request()
    await link.send(OK)
    await link.request()


async def answering_once_then_closing(link: Link) -> None:
    """The first request is answered, and then the idle connection closed."""
    await link.request()
    await link.send(OK)


def client(engine: Engine, wire: EngineTransport, *, retries: int) -> EngineHttp:
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


Talk = Callable[..., Awaitable[tuple[Engine, EngineHttp]]]
"""Starts an engine served by the scripts given, and a client of it with ``retries``."""


@pytest.fixture
async def talk(engine_wire: EngineTransport) -> AsyncIterator[Talk]:
    """Engines and their clients (on the wire of the test), all closed when it ends."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(*scripts: Handler, retries: int = 2) -> tuple[Engine, EngineHttp]:
            engine = await stack.enter_async_context(Engine(*scripts))
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
    await engine.let_go()  # the client gave the connection up, and sent nothing more
    assert (len(engine.requests), engine.connections) == (1, 1)
    assert len(raised.value.message) < 400  # the engine's bytes are quoted cut...
    assert "Hunter2Secret" not in raised.value.message  # ...and masked


async def test_an_adapter_reports_a_malformed_answer_as_a_protocol_error(
    engine_wire: EngineTransport,
) -> None:
    async with Engine(answering(MALFORMED["garbage"])) as engine:
        adapter = OpenAICompatibleEngine(engine.url + "/v1", wire=engine_wire, max_retries=2)
        request = InferenceRequest(messages=(Message.user("Capital of France?"),), model="m")
        try:
            with pytest.raises(EngineProtocolError, match="malformed HTTP answer"):
                await asyncio.wait_for(adapter.generate(request), GUARD)
        finally:
            await adapter.aclose()
        await engine.let_go()
        assert len(engine.requests) == 1


# --- a broken connection: tried again ----------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_an_idle_connection_the_engine_closed_costs_nothing(
    talk: Talk, streamed: bool
) -> None:
    engine, http = await talk(answering_once_then_closing, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    await engine.let_go()  # the engine closed the idle connection
    assert await ask(http, streamed=streamed) == BODY
    assert (len(engine.requests), engine.connections) == (2, 2)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_kept_alive_connection_dropped_as_the_request_came_is_retried(
    talk: Talk, streamed: bool
) -> None:
    engine, http = await talk(answering_once_then_dropping, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    assert await ask(http, streamed=streamed) == BODY  # sent again, on a new connection
    assert (len(engine.requests), engine.connections) == (3, 2)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("script", [dropping, resetting], ids=["closed", "reset"])
async def test_a_connection_broken_before_a_byte_of_the_answer_is_retried(
    talk: Talk, script: Handler, streamed: bool
) -> None:
    engine, http = await talk(script, answering(OK), retries=1)
    assert await ask(http, streamed=streamed) == BODY
    assert (len(engine.requests), engine.connections) == (2, 2)


@pytest.mark.parametrize("retries", [0, 1, 2])
@pytest.mark.parametrize("script", [dropping, resetting], ids=["closed", "reset"])
async def test_connections_broken_again_and_again_count_against_max_retries(
    talk: Talk, script: Handler, retries: int
) -> None:
    engine, http = await talk(script, retries=retries)
    with pytest.raises(EngineUnavailableError, match="Cannot reach the counted engine"):
        await ask(http, streamed=False)
    await engine.let_go()
    assert (len(engine.requests), engine.connections) == (1 + retries, 1 + retries)
