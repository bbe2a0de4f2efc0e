"""The httptools wire against an engine that attacks it and a caller that misuses it.

Each engine here is a few lines of asyncio on a loopback port, scripted by the test: it
writes raw bytes, records every request it reads, counts its connections, and holds an
answer until the test opens its gate, so that every test waits for what it needs to have
happened, never for a clock. ``GUARD`` only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import socket
import tracemalloc
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from jarvis.adapters.inference._bodies import read_capped
from jarvis.adapters.inference._http import EngineHttp, RetryPolicy
from jarvis.adapters.inference._httptools_pool import (
    BUFFERED_BYTES,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    Pool,
)
from jarvis.adapters.inference._json import encode
from jarvis.adapters.inference._wire import MAX_CONNECTIONS
from jarvis.adapters.inference._wire_httptools import HttptoolsWire
from jarvis.domain.errors import EngineProtocolError, EngineTimeoutError, EngineUnavailableError
from tests.support.raw_loopback_engine import GUARD, Engine, Handler, Link

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
READ_SIZE = 256 * 1024
"""The most asyncio's transports read at once."""
STATUS = b"HTTP/1.1 200 OK\r\n"
FIELDS = b"Content-Length: 2\r\n\r\nhi"
"""The rest of an answer after its status line: its length, and its body."""
OK = STATUS + FIELDS
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
CHUNKED = STATUS + b"Transfer-Encoding: chunked\r\n\r\n"
TOO_LARGE = f"head \\(or trailer\\) larger than {MAX_HEAD_BYTES} bytes"


def answering(answer: bytes, *, close: bool = False) -> Handler:
    """Every request gets ``answer``; with ``close``, the connection ends after it."""

    async def handle(link: Link) -> None:
        while await link.request():
            await link.send(answer)
            if close:
                return

    return handle


def holding(answer: bytes = OK) -> Handler:
    """Every request gets ``answer`` once the test opened the gate of its path."""

    async def handle(link: Link) -> None:
        while request := await link.request():
            await link.engine.gate(request.split(b" ", 2)[1].decode()).wait()
            await link.send(answer)

    return handle


def flooding(prefix: bytes, piece: bytes, size: int, end: bytes = b"") -> Handler:
    """The first request gets ``prefix``, ``piece`` again and again (``size`` bytes of it,
    each written once the client took the one before), then ``end``; later ones, OK."""

    async def handle(link: Link) -> None:
        if await link.request():
            await link.send(prefix)
            for _ in range(size // len(piece)):
                await link.send(piece)
            await link.send(end)
            await answering(OK)(link)

    return handle


def on_first(first: Handler) -> Handler:
    """The first connection is served by ``first``, every later one answered OK."""

    async def handle(link: Link) -> None:
        await (first if link.number == 1 else answering(OK))(link)

    return handle


def client(
    url: str, *, retries: int = 0, timeout: float = GUARD, headers: dict[str, str] | None = None
) -> EngineHttp:
    """An engine client on the httptools wire. Its backoff is longer than the deadline: a
    retry that happens at all is one made at once."""
    retry = RetryPolicy(max_retries=retries, backoff=2 * GUARD, backoff_cap=2 * GUARD)
    return EngineHttp(
        engine_id="hostile",
        base_url=url,
        start_hint="Start it.",
        timeout=timeout,
        retry=retry,
        headers=headers,
        wire="httptools",
    )


@contextlib.asynccontextmanager
async def talking(
    handler: Handler,
    *,
    retries: int = 0,
    timeout: float = GUARD,
    host: str = "127.0.0.1",
    path: str = "",
    headers: dict[str, str] | None = None,
) -> AsyncIterator[tuple[Engine, EngineHttp]]:
    """An engine served by ``handler``, and a client of it whose base URL is ``path``
    below the engine's."""
    async with Engine(handler, host=host) as engine:
        http = client(engine.url + path, retries=retries, timeout=timeout, headers=headers)
        try:
            yield engine, http
        finally:
            await http.aclose()


def pool(http: EngineHttp) -> Pool:
    wire = http._get_wire()
    assert isinstance(wire, HttptoolsWire)
    return wire._pool


async def body_of(http: EngineHttp, path: str = "/") -> bytes:
    async with asyncio.timeout(GUARD):
        return (await http.request("GET", path)).body


# --- heads: bounded in size, fields and time --------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "piece", "end"),
    [
        (STATUS + b"X-Long: ", b"a" * 65536, b"\r\n" + FIELDS),
        (b"", EARLY_HINTS * 1600, OK),
        (STATUS, b"X-Again: 1\r\n" * 5000, FIELDS),
        (CHUNKED + b"2\r\nhi\r\n0\r\nX-Sum: ", b"a" * 65536, b"\r\n\r\n"),
    ],
    ids=["a-field", "interim-answers", "fields", "a-trailer"],
)
async def test_a_head_that_does_not_end_is_refused_early_with_bounded_memory(
    prefix: bytes, piece: bytes, end: bytes
) -> None:
    # 32 MiB of head, then a proper end: only a wire that counts as the bytes come refuses it
    tracemalloc.start()
    try:
        async with talking(on_first(flooding(prefix, piece, 32 * MIB, end))) as (engine, http):
            with pytest.raises(EngineProtocolError, match=TOO_LARGE):
                await body_of(http)
            _, peak = tracemalloc.get_traced_memory()
            assert await body_of(http) == b"hi"  # on a new connection
            assert engine.connections == 2
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB


@pytest.mark.parametrize("same_name", [False, True])
@pytest.mark.parametrize("fields", [MAX_HEADERS, MAX_HEADERS + 1])
async def test_a_head_of_more_than_max_headers_fields_is_refused(
    fields: int, same_name: bool
) -> None:
    names = [b"X-Same" if same_name else b"X-%d" % n for n in range(fields - 1)]
    head = STATUS + b"".join(name + b": 1\r\n" for name in names)
    async with talking(answering(head + FIELDS)) as (_, http):
        if fields <= MAX_HEADERS:
            assert await body_of(http) == b"hi"
        else:
            with pytest.raises(EngineProtocolError, match=TOO_LARGE):
                await body_of(http)


async def test_a_single_field_larger_than_max_head_bytes_is_refused() -> None:
    field = b"X-Long: " + b"a" * MAX_HEAD_BYTES + b"\r\n"
    async with talking(answering(STATUS + field + FIELDS)) as (_, http):
        with pytest.raises(EngineProtocolError, match=TOO_LARGE):
            await body_of(http)


async def test_a_head_that_trickles_ends_at_the_deadline() -> None:
    async def trickle(link: Link) -> None:
        await link.request()
        await link.send(STATUS + b"X-Slow: ")
        await link.reader.read()  # until the client hangs up

    async with talking(trickle, timeout=0.5) as (engine, http):
        with pytest.raises(EngineTimeoutError, match=r"within 0\.5 s"):
            await body_of(http)
        await engine.let_go()
        assert not pool(http)._open


# --- bytes nobody asked for ---------------------------------------------------------------


async def test_bytes_sent_before_any_request_cost_only_that_connection() -> None:
    async def early(link: Link) -> None:
        await link.send(b"garbage\r\n")
        await answering(OK)(link)

    # the request goes out as soon as the connection is up: what comes back is its answer,
    # malformed, and not asked for again, retries or not
    async with talking(on_first(early), retries=1) as (engine, http):
        with pytest.raises(EngineProtocolError, match="malformed HTTP answer"):
            await body_of(http)
        assert await body_of(http) == b"hi"
        assert engine.connections == 2


@pytest.mark.parametrize(
    "junk",
    [b"HTTP/1.1 200\r\n\r\njunk", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nyo", b"JUNK"],
    ids=["answer-without-length", "second-answer", "garbage"],
)
async def test_bytes_after_a_complete_answer_are_never_read_as_body_or_next_answer(
    junk: bytes,
) -> None:
    async with talking(answering(OK + junk)) as (engine, http):
        assert [await body_of(http) for _ in range(2)] == [b"hi", b"hi"]
        assert engine.connections == 2  # the first one was not reused


async def test_bytes_sent_on_an_idle_connection_retire_it() -> None:
    async def chatty(link: Link) -> None:
        await answering(OK, close=True)(link)
        await link.send(b"unasked")
        await link.reader.read()  # until the client hangs up

    async with talking(on_first(chatty)) as (engine, http):
        assert await body_of(http) == b"hi"
        await engine.let_go()  # the client dropped the connection
        assert not pool(http)._open
        assert await body_of(http) == b"hi"
        assert engine.connections == 2


# --- answers of every shape --------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    answer: bytes
    body: bytes = b"hi"
    kept: bool = True
    """Whether the connection carries the next request."""
    close: bool = False
    """Whether the engine closes the connection after the answer."""
    status: int = 200


SHAPES = {
    "connection-close": Shape(STATUS + b"Connection: close\r\n" + FIELDS, kept=False),
    "http-1.0": Shape(b"HTTP/1.0 200 OK\r\n" + FIELDS, kept=False),
    "http-1.0-keep-alive": Shape(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n" + FIELDS),
    "until-eof": Shape(STATUS + b"\r\nto the end", b"to the end", kept=False, close=True),
    "http-1.0-until-eof": Shape(
        b"HTTP/1.0 200 OK\r\n\r\nto the end", b"to the end", kept=False, close=True
    ),
    "chunked-trailers": Shape(CHUNKED + b"2\r\nhi\r\n3\r\n yo\r\n0\r\nX-Sum: 5\r\n\r\n", b"hi yo"),
    "204": Shape(b"HTTP/1.1 204 No Content\r\n\r\n", b"", status=204),
    "interim-answers": Shape(b"HTTP/1.1 100 Continue\r\n\r\n" + EARLY_HINTS + OK),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
async def test_answers_of_every_shape_are_read_whole_and_kept_alive_only_when_they_say_so(
    shape: Shape,
) -> None:
    async with talking(answering(shape.answer, close=shape.close)) as (engine, http):
        for path in ("/a", "/b"):
            response = await http.open("GET", path)
            assert response.status_code == shape.status
            assert b"".join([chunk async for chunk in response.chunks()]) == shape.body
            # the head the caller read is the final one: no interim field, no trailer
            assert (response.header("link"), response.header("x-sum")) == ("", "")
            await response.close(reusable=True)
        assert engine.connections == (1 if shape.kept else 2)
        assert engine.paths() == ["/a", "/b"]


async def test_switching_protocols_is_refused() -> None:
    switch = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    )
    async with talking(on_first(answering(switch + b"\x81\x00"))) as (engine, http):
        with pytest.raises(EngineProtocolError, match="switched protocols"):
            await body_of(http)
        assert await body_of(http) == b"hi"
        assert engine.connections == 2


# --- connections that break ---------------------------------------------------------------


@pytest.mark.parametrize("retries", [0, 1])
async def test_a_reset_mid_head_is_retried_at_once(retries: int) -> None:
    async def cut(link: Link) -> None:
        await link.request()
        await link.send(STATUS + b"Content-Le")
        link.reset()

    async with talking(on_first(cut), retries=retries) as (engine, http):
        if retries:
            assert await body_of(http) == b"hi"
        else:
            with pytest.raises(EngineUnavailableError, match="RemoteProtocolError"):
                await body_of(http)
        assert engine.connections == 1 + retries


async def test_a_reset_mid_body_is_reported_and_costs_only_that_connection() -> None:
    async def cut(link: Link) -> None:
        await link.request()
        await link.send(STATUS + b"Content-Length: 100\r\n\r\nfirst line\n")
        await link.engine.gate("/cut").wait()
        link.reset()

    async with talking(on_first(cut)) as (engine, http):
        response = await http.open("GET", "/cut")
        lines = http.lines(response, deadline=http.deadline(), max_bytes=MIB)
        assert await anext(lines) == "first line"
        engine.release_all()
        with pytest.raises(EngineUnavailableError, match="dropped mid-stream"):
            await anext(lines)
        await http.release(response, reusable=False)
        assert not pool(http)._open
        assert await body_of(http) == b"hi"


async def test_a_pooled_connection_the_engine_closed_is_retried_at_once() -> None:
    async def stale(link: Link) -> None:
        await answering(OK, close=True)(link)
        await link.request()  # the next request on it is dropped unanswered

    async with talking(on_first(stale), retries=1) as (engine, http):
        assert [await body_of(http) for _ in range(2)] == [b"hi", b"hi"]
        assert (engine.connections, len(engine.requests)) == (2, 3)


async def test_a_huge_body_read_slowly_pauses_reading_and_arrives_whole() -> None:
    size = 16 * MIB
    head = STATUS + b"Content-Length: %d\r\n\r\n" % size
    async with talking(flooding(head, b"x" * 65536, size)) as (engine, http):
        response = await http.open("GET", "/")
        (connection,) = pool(http)._open
        transport = connection.transport
        assert transport is not None
        paused = asyncio.Event()
        pause_reading = transport.pause_reading

        def pause() -> None:
            pause_reading()
            paused.set()

        chunks, taken = response.chunks(), 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(transport, "pause_reading", pause)
            while taken < size:
                # a reader slower than the engine: before each piece it takes, the wire
                # has stopped reading (unless what is left is less than it holds)
                if transport.is_reading() and size - taken >= BUFFERED_BYTES:
                    paused.clear()
                    await asyncio.wait_for(paused.wait(), GUARD)
                assert connection._buffered <= BUFFERED_BYTES + READ_SIZE
                taken += len(await anext(chunks))
        assert taken == size
        await response.close(reusable=True)
        assert await body_of(http) == b"hi"
        assert engine.connections == 1


# --- callers that give up, or misuse an answer -------------------------------------------


async def test_giving_up_while_waiting_for_the_head_leaks_nothing() -> None:
    async def mute(link: Link) -> None:
        await link.request()
        await link.reader.read()  # until the client hangs up

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with talking(on_first(mute)) as (engine, http):
            task = asyncio.create_task(http.request("GET", "/"))
            await engine.received(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not pool(http)._open
            await engine.let_go()
            assert await body_of(http) == b"hi"
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


async def half(link: Link) -> None:
    """The first request gets half its body; the rest never comes."""
    await link.request()
    await link.send(STATUS + b"Content-Length: 8\r\n\r\nhalf")
    await link.reader.read()  # until the client hangs up


async def test_giving_up_while_reading_the_body_leaks_nothing() -> None:
    async with talking(on_first(half)) as (engine, http):
        response = await http.open("GET", "/")
        reader = asyncio.create_task(read_capped(response, MIB))
        await asyncio.sleep(0)  # the reader starts, and waits for the rest of the body
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert not pool(http)._open
        await engine.let_go()
        assert await body_of(http) == b"hi"


async def test_an_answer_given_back_is_done_with() -> None:
    """Closing it again never closes the connection the next request took; a reader of
    its body made before never reads the next answer."""
    async with talking(answering(OK)) as (engine, http):
        first = await http.open("GET", "/a")
        early = first.chunks()
        assert await read_capped(first, MIB) == b"hi"  # given back, kept alive
        second = await http.open("GET", "/b")
        await first.close(reusable=False)
        with pytest.raises(httpx.ReadError):
            await anext(early)
        assert await read_capped(second, MIB) == b"hi"
        assert await body_of(http) == b"hi"
        assert engine.connections == 1


async def test_closing_an_answer_wakes_its_reader() -> None:
    async with talking(half) as (_, http):
        response = await http.open("GET", "/")
        chunks = response.chunks()
        assert await anext(chunks) == b"half"
        rest = asyncio.ensure_future(anext(chunks))
        await response.close(reusable=False)
        with pytest.raises(httpx.ReadError):
            await asyncio.wait_for(rest, GUARD)


async def test_an_answer_dropped_unclosed_gives_its_connection_back() -> None:
    async with talking(answering(OK)) as (engine, http):
        response = await http.open("GET", "/")
        del response
        await asyncio.sleep(0)  # the place is freed on the loop, queued before this task
        assert not pool(http)._open
        await engine.let_go()


async def test_closing_the_client_ends_requests_in_flight_and_in_line_at_once() -> None:
    async with talking(holding()) as (engine, http):
        tasks = [
            asyncio.create_task(http.request("GET", f"/{n}")) for n in range(MAX_CONNECTIONS + 1)
        ]
        await engine.received(MAX_CONNECTIONS)
        await http.aclose()
        async with asyncio.timeout(GUARD / 2):  # far before the requests' deadline
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(outcome, EngineUnavailableError) for outcome in outcomes)


# --- the pool: at most MAX_CONNECTIONS, first come first served --------------------------


async def test_requests_beyond_max_connections_wait_and_all_succeed() -> None:
    count = MAX_CONNECTIONS + 50
    async with talking(holding()) as (engine, http):
        for _ in range(2):  # the second time on the kept connections: nothing was lost
            engine.close_gates()
            held = len(engine.requests) + MAX_CONNECTIONS
            tasks = [asyncio.create_task(http.request("GET", f"/{n}")) for n in range(count)]
            await engine.received(held)
            gone = tasks[MAX_CONNECTIONS + 10 : MAX_CONNECTIONS + 30]  # waiting in line
            for task in gone:
                task.cancel()
            engine.release_all()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            assert [o.body for o in outcomes if not isinstance(o, BaseException)] == [b"hi"] * (
                count - len(gone)
            )
            assert all(task.cancelled() for task in gone)
        assert engine.connections == MAX_CONNECTIONS
        assert len(pool(http)._open) == MAX_CONNECTIONS


async def test_requests_in_line_keep_their_place() -> None:
    async with talking(holding()) as (engine, http):
        holders = [
            asyncio.create_task(http.request("GET", f"/h{n}")) for n in range(MAX_CONNECTIONS)
        ]
        await engine.received(MAX_CONNECTIONS)
        line = [asyncio.create_task(http.request("GET", f"/w{n}")) for n in range(1, 5)]
        # a holder gives up: its place goes to /w1, which gives up as soon as it has it
        holders[0].cancel()
        asyncio.get_running_loop().call_soon(line[0].cancel)
        await engine.received(MAX_CONNECTIONS + 1)
        assert engine.paths()[-1] == "/w2"
        engine.gate("/h1").set()  # its connection goes to the next in line
        await engine.received(MAX_CONNECTIONS + 2)
        assert engine.paths()[-1] == "/w3"
        engine.release_all()
        outcomes = await asyncio.gather(*holders, *line, return_exceptions=True)
    assert [type(o).__name__ for o in outcomes].count("CancelledError") == 2
    assert engine.paths()[-1] == "/w4"


# --- what reaches the engine ---------------------------------------------------------------


async def test_the_head_says_the_host_and_the_true_length_and_a_get_has_no_body() -> None:
    async with talking(answering(OK)) as (engine, http):
        await body_of(http, "/v1/models")
        async with asyncio.timeout(GUARD):
            await http.request("POST", "/v1/chat", json={"q": "é"})
    get, post = engine.requests
    assert get == (
        b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: jarvis\r\n"
        b"Accept-Encoding: identity\r\n\r\n" % engine.port
    )
    head, body = post.split(b"\r\n\r\n")
    assert body == encode({"q": "é"})
    assert head.count(b"\r\nContent-Length: %d" % len(body)) == 1
    assert head.lower().count(b"\r\nhost: ") == head.lower().count(b"content-length") == 1


@pytest.mark.parametrize(
    ("path", "headers", "refused"),
    [
        ("/v1\r\nX-Injected: 1", {}, None),
        ("/v1 HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET /smuggled", {}, None),
        ("/v1 X-Injected", {}, None),
        ("\r\nX-Injected: 1", {}, "UnsupportedProtocol"),
        ("/v1", {"Authorization": "Bearer k\r\nX-Injected: 1"}, "control character"),
        ("/v1", {"Authorization": "Bearer k\n"}, "control character"),
        ("/v1", {"X-Injected: 1\r\nX-A": "b"}, "not an HTTP token"),
        ("/v1", {"X A": "b"}, "not an HTTP token"),
        ("/v1", {"Content-Length": "0"}, "the wire's to write"),
        ("/v1", {"Transfer-Encoding": "chunked"}, "the wire's to write"),
    ],
)
async def test_no_line_break_of_a_url_or_header_reaches_the_engine(
    path: str, headers: dict[str, str], refused: str | None
) -> None:
    async with talking(answering(OK), path=path, headers=headers) as (engine, http):
        async with asyncio.timeout(GUARD):
            if refused is None:
                await http.request("POST", "/models", json={})
            else:
                with pytest.raises(EngineUnavailableError, match=refused):
                    await http.request("POST", "/models", json={})
    for request in engine.requests:
        head, body = request.split(b"\r\n\r\n")
        assert body == b"{}"
        lines = head.split(b"\r\n")
        assert lines[0].count(b" ") == 2  # method, target, version
        assert not any(b"\r" in line or b"\n" in line for line in lines)
        assert not any(line.lower().startswith(b"x-injected") for line in lines)
    assert len(engine.requests) == (0 if refused else 1)


async def test_a_host_header_of_the_caller_replaces_the_wires() -> None:
    async with talking(answering(OK), headers={"host": "engine.local"}) as (engine, http):
        assert await body_of(http) == b"hi"
    (request,) = engine.requests
    assert re.findall(rb"(?im)^host: .*$", request) == [b"host: engine.local\r"]


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
async def test_an_ipv6_engine_is_reached_and_named_in_the_host_header() -> None:
    async with talking(answering(OK), host="::1") as (engine, http):
        assert await body_of(http) == b"hi"
        assert pool(http)._open  # sent by this wire, not the fallback
    assert b"\r\nHost: [::1]:%d\r\n" % engine.port in engine.requests[0]
