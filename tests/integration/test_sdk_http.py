"""The SDK over real HTTP: the OpenAI-compatible adapter against the loopback stub server."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.stub_server import ANSWER, StubServer
from jarvis import Jarvis

pytestmark = pytest.mark.integration


def test_sync_calls_reuse_one_connection(stub_server: StubServer) -> None:
    with Jarvis(engine="openai", base_url=stub_server.url, model="stub-model") as j:
        assert j.ask("warm up") == ANSWER
        before = stub_server.connections
        answers = [j.ask(f"q{i}") for i in range(10)]
        streamed = "".join(j.ask_stream("stream it"))
        assert stub_server.connections == before  # no client or connection rebuilt per call
    assert answers == [ANSWER] * 10
    assert streamed == ANSWER


async def test_fifty_concurrent_runs_share_one_pool(stub_server: StubServer) -> None:
    async with Jarvis(engine="openai", base_url=stub_server.url, model="stub-model") as j:
        first = await asyncio.gather(*(j.aask(f"q{i}") for i in range(50)))
        opened = stub_server.connections
        second = await asyncio.gather(*(j.aask(f"r{i}") for i in range(50)))
        reopened = stub_server.connections - opened
        pieces = [p async for p in j.aask_stream("stream")]
    assert first == second == [ANSWER] * 50
    assert "".join(pieces) == ANSWER
    # the second burst reuses the pooled keep-alive connections of the first one
    assert reopened < 50


def test_ask_full_reports_usage_and_engine(stub_server: StubServer) -> None:
    with Jarvis(engine="openai", base_url=stub_server.url) as j:
        answer = j.ask_full("q")
    assert answer.engine == "openai"
    assert answer.model == "stub-model"
    assert answer.usage.completion_tokens > 0
    assert answer.stop_reason == "final_answer"


# --- one pool per event loop ---------------------------------------------------------------


@pytest.fixture
def own_stub() -> Iterator[StubServer]:
    """A stub of this test alone, so that it can count open connections exactly."""
    with StubServer() as stub:
        yield stub


def _jarvis(stub: StubServer) -> Jarvis:
    return Jarvis(engine="openai", base_url=stub.url, model="stub-model")


def test_a_loop_that_shuts_down_closes_its_connections(own_stub: StubServer) -> None:
    j = _jarvis(own_stub)

    async def burst() -> list[str]:
        return await asyncio.gather(*(j.aask(f"q{i}") for i in range(5)))

    try:
        assert asyncio.run(burst()) == [ANSWER] * 5
        assert own_stub.connections > 0
        assert own_stub.wait_open_connections(0) == 0  # closed as asyncio.run ended
        assert asyncio.run(burst()) == [ANSWER] * 5  # a new loop, a pool of its own
        assert own_stub.wait_open_connections(0) == 0
    finally:
        j.close()


async def test_another_loop_gets_its_own_pool(own_stub: StubServer) -> None:
    async with _jarvis(own_stub) as j:
        assert await j.aask("on this loop") == ANSWER
        assert own_stub.open_connections == 1

        async def burst() -> list[str]:
            return await asyncio.gather(*(j.aask(f"q{i}") for i in range(5)))

        elsewhere = await asyncio.to_thread(asyncio.run, burst())
        assert elsewhere == [ANSWER] * 5
        # the other loop's connections closed with it; this loop's pooled one stayed
        assert await asyncio.to_thread(own_stub.wait_open_connections, 1) == 1
        before = own_stub.connections
        assert await j.aask("again") == ANSWER
        assert own_stub.connections == before  # reused, not reopened
    assert own_stub.wait_open_connections(0) == 0


def test_several_loops_at_once(own_stub: StubServer) -> None:
    with _jarvis(own_stub) as j:

        def on_own_loop(n: int) -> list[str]:
            async def burst() -> list[str]:
                return await asyncio.gather(*(j.aask(f"{n}-{i}") for i in range(10)))

            return asyncio.run(burst())

        with ThreadPoolExecutor(4) as pool:
            bursts = list(pool.map(on_own_loop, range(4)))
            synced = list(pool.map(j.ask, ["a", "b", "c", "d"]))
    assert bursts == [[ANSWER] * 10] * 4
    assert synced == [ANSWER] * 4
    assert own_stub.wait_open_connections(0) == 0


def test_a_loop_closed_without_shutting_down(own_stub: StubServer) -> None:
    """``loop.close()`` without ``shutdown_asyncgens()``: the pool is forgotten, not reused."""
    j = _jarvis(own_stub)
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(j.aask("q")) == ANSWER
    finally:
        loop.close()
    try:
        assert asyncio.run(j.aask("on a new loop")) == ANSWER
    finally:
        j.close()
    del loop
    gc.collect()  # nothing left for a finalizer to hand to the closed loop


def test_sync_close_inside_a_coroutine(own_stub: StubServer) -> None:
    async def main() -> str:
        j = _jarvis(own_stub)
        answer = await j.aask("q")
        j.close()  # does not wait for this (busy) loop: its connections close right after
        return answer

    assert asyncio.run(main()) == ANSWER
    assert own_stub.wait_open_connections(0) == 0
