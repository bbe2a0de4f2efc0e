"""The SDK over real HTTP: the OpenAI-compatible adapter against the loopback stub server."""

from __future__ import annotations

import asyncio

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
