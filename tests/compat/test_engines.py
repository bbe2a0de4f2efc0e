"""OpenJarvis's engine classes over jarvis's engines, on the stub engine of ``bench/``."""

from __future__ import annotations

import socket

from bench.stub_server import ANSWER, StubServer
from jarvis.agents.simple import SimpleAgent
from jarvis.application.config import EngineSettings, JarvisConfig, OpenAISettings
from jarvis.engine import get_engine
from jarvis.engine.openai_compat_engines import LMStudioEngine, VLLMEngine


def test_one_engine_serves_runs_on_successive_event_loops(stub_server: StubServer) -> None:
    """``agent.run`` is synchronous: each call runs on an event loop of its own."""
    engine = VLLMEngine(host=stub_server.url.removesuffix("/v1"))
    agent = SimpleAgent(engine, model="stub-model", temperature=0.2, max_tokens=64)
    assert agent.temperature == 0.2
    assert agent.max_tokens == 64
    assert [agent.run("one").content, agent.run("two").content] == [ANSWER, ANSWER]
    assert engine.base_url == stub_server.url


def test_host_without_v1_gets_it(stub_server: StubServer) -> None:
    host = stub_server.url.removesuffix("/v1")
    assert LMStudioEngine(host=host).base_url == stub_server.url
    assert LMStudioEngine(host=stub_server.url).base_url == stub_server.url


def test_get_engine_returns_an_answering_engine_or_none(stub_server: StubServer) -> None:
    config = JarvisConfig(
        engine=EngineSettings(name="openai", openai=OpenAISettings(base_url=stub_server.url))
    )
    found = get_engine(config)
    assert found is not None
    assert found[0] == "openai"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    down = JarvisConfig(
        engine=EngineSettings(
            name="openai",
            max_retries=0,
            openai=OpenAISettings(base_url=f"http://127.0.0.1:{closed}/v1"),
        )
    )
    assert get_engine(down) is None
    assert get_engine(config, "no-such-engine") is None
