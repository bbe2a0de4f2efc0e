"""The engine connection pool (:class:`LeanPool`) over real loopback sockets.

The server is a few lines of asyncio speaking HTTP/1.1 keep-alive: it counts the
connections it accepted and the requests it is holding, and holds every answer until the
test opens its gate, so that the tests know how many requests are in flight without
waiting on time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpcore
import httpx
import pytest

from jarvis.adapters.inference._pool import LeanPool
from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.messages import Message

pytestmark = pytest.mark.integration

COMPLETION = json.dumps(
    {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
).encode()


class HoldingServer:
    def __init__(self) -> None:
        self.connections = 0
        self.held = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def wait_held(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.held >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                async with self._changed:
                    self.held += 1
                    self._changed.notify_all()
                await self.gate.wait()
                async with self._changed:
                    self.held -= 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(COMPLETION), COMPLETION)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> HoldingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gate.set()
        assert self._server is not None
        self._server.close()


@pytest.fixture
async def server() -> AsyncIterator[HoldingServer]:
    async with HoldingServer() as running:
        yield running


def _request() -> InferenceRequest:
    return InferenceRequest(messages=(Message.user("hello"),), model="m")


async def test_a_request_costs_the_same_however_many_idle_connections_the_pool_holds(
    server: HoldingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx's own pool asks every idle connection whether it expired on each request (a
    system call each, and a count of the whole pool for each): 50 idle connections, 50
    times the work. Ours looks at the one it takes and at most one more."""
    engine = OpenAICompatibleEngine(server.url + "/v1", max_retries=0)
    server.gate.clear()
    first = [asyncio.ensure_future(engine.generate(_request())) for _ in range(50)]
    await server.wait_held(50)
    server.gate.set()
    await asyncio.gather(*first)
    assert server.connections == 50

    checks = 0
    original = httpcore.AsyncHTTP11Connection.has_expired

    def counted(self: httpcore.AsyncHTTP11Connection) -> bool:
        nonlocal checks
        checks += 1
        return original(self)

    monkeypatch.setattr(httpcore.AsyncHTTP11Connection, "has_expired", counted)
    assert (await engine.generate(_request())).content == "hi"
    assert checks <= 2
    assert server.connections == 50  # an idle one was reused
    await engine.aclose()


async def test_requests_beyond_max_connections_wait_for_one(server: HoldingServer) -> None:
    pool = LeanPool(max_connections=3)
    async with httpx.AsyncClient(transport=pool, base_url=server.url) as client:
        server.gate.clear()
        replies = [asyncio.ensure_future(client.post("/x", content=b"{}")) for _ in range(10)]
        await server.wait_held(3)
        assert pool.open_connections == 3
        server.gate.set()
        done = await asyncio.gather(*replies)
        assert [r.status_code for r in done] == [200] * 10
        assert server.connections == 3
        assert pool.open_connections == 3
    assert pool.open_connections == 0  # closing the client closed the idle ones


async def test_a_cancelled_waiter_passes_its_turn_on(server: HoldingServer) -> None:
    pool = LeanPool(max_connections=1)
    async with httpx.AsyncClient(transport=pool, base_url=server.url) as client:
        server.gate.clear()
        holding = asyncio.ensure_future(client.post("/x", content=b"{}"))
        await server.wait_held(1)
        cancelled = asyncio.ensure_future(client.post("/x", content=b"{}"))
        waiting = asyncio.ensure_future(client.post("/x", content=b"{}"))
        await asyncio.sleep(0)  # both are queued for the one connection now
        cancelled.cancel()
        server.gate.set()
        assert (await holding).status_code == 200
        assert (await waiting).status_code == 200
        assert cancelled.cancelled()
        assert pool.open_connections == 1


async def test_a_response_not_read_to_the_end_closes_its_connection(
    server: HoldingServer,
) -> None:
    pool = LeanPool(max_connections=4)
    async with httpx.AsyncClient(transport=pool, base_url=server.url) as client:
        async with client.stream("POST", "/x", content=b"{}") as reply:
            assert reply.status_code == 200  # the body is left unread
        assert pool.open_connections == 0
        assert (await client.post("/x", content=b"{}")).json()["choices"][0]
        assert (await client.post("/x", content=b"{}")).status_code == 200
        assert server.connections == 2  # a new one after the unread body, then reused
        assert pool.open_connections == 1


async def test_a_refused_connection_is_httpx_connect_error_and_frees_its_slot() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    pool = LeanPool(max_connections=1)
    async with httpx.AsyncClient(transport=pool) as client:
        for _ in range(2):
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")
        assert pool.open_connections == 0


async def test_an_engine_behind_a_proxy_from_the_environment_is_reached_through_it(
    server: HoldingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP_PROXY`` keeps working: the pool steps aside for httpx's proxy transport. The
    "engine" here is a port nothing listens on; only the proxy (the holding server, which
    answers whatever it is asked) can answer."""
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    engine = OpenAICompatibleEngine(f"http://127.0.0.1:{port}/v1", max_retries=0)
    assert (await engine.generate(_request())).content == "hi"
    assert server.connections == 1
    await engine.aclose()
