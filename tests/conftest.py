"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from bench.stub_server import StubServer
from tests.support.llama_server import LlamaServer, missing_requirement, running_llama_server
from tests.support.ollama_server import OllamaProtocolServer, running_ollama_server
from tests.support.ports import closed_port

# Hypothesis's defaults fail an example that takes over 200 ms, and a test whose examples
# are generated slowly: on a machine loaded by the rest of the suite (or a CPU burner) a
# stall can do either, whatever the code under test. What is tested is the property; the
# tests that bound time do it themselves, by CPU time.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

_ENGINE_ENV = (
    "OLLAMA_HOST",
    "VLLM_HOST",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "XDG_DATA_HOME",
    "JARVIS_SEARCH_URL",
    # an API key of the developer's environment would change what jarvis serve requires
    "JARVIS_API_KEY",
    "OPENJARVIS_API_KEY",
)


@pytest.fixture(autouse=True)
def jarvis_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty config dir and no engine settings from the environment."""
    home = tmp_path_factory.mktemp("openjarvis-home")
    monkeypatch.setenv("OPENJARVIS_HOME", str(home))
    for name in _ENGINE_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def closed() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test (see ``closed_port``)."""
    with closed_port() as port:
        yield port


@pytest.fixture(scope="session")
def stub_server() -> Iterator[StubServer]:
    """The loopback fake OpenAI-compatible server of ``bench/`` (fast, canned answers)."""
    with StubServer() as stub:
        yield stub


@pytest.fixture(scope="session")
def slow_stub_server() -> Iterator[StubServer]:
    """The same stub, waiting 0.5 s between streamed chunks (for interrupting a stream)."""
    with StubServer(chunk_delay=0.5) as stub:
        yield stub


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """The real llama.cpp OpenAI-compatible server with SmolLM2, once per session."""
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)
    with running_llama_server() as server:
        yield server


@pytest.fixture(scope="session")
def ollama_server(llama_server: LlamaServer) -> Iterator[OllamaProtocolServer]:
    """The Ollama-API protocol server in front of :func:`llama_server` (see its docstring)."""
    with running_ollama_server(llama_server.base_url, llama_server.model) as server:
        yield server


@pytest.fixture(params=["httptools", "aiohttp", "httpx"])
def engine_wire(request: pytest.FixtureRequest) -> str:
    """The transport an HTTP engine adapter sends over: every engine test runs on each."""
    value: str = request.param
    return value
