"""The composition root: every provider resolves, the selector follows config, auto is honest."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.config import EngineSettings, JarvisConfig, OllamaSettings, validate
from jarvis.application.registry import AgentRegistry
from jarvis.application.system_prompt import SystemPromptBuilder
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.domain.events import EventBus
from jarvis.entrypoints.container import (
    Container,
    aclose_engines,
    choose_engine,
    configure,
    engine_location,
)
from jarvis.testing import ScriptedInference


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _FakeOllama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/api/version":
            body = json.dumps({"version": "0.9.0"}).encode()
            self.send_response(200)
        else:
            body = b'{"error": "not found"}'
            self.send_response(404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_ollama() -> Iterator[str]:
    """Something that answers like Ollama's ``/api/version`` on a loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def config_with(**engine: object) -> JarvisConfig:
    return validate(JarvisConfig, {"engine": engine})


class TestSmoke:
    def test_every_provider_resolves_with_fakes(self) -> None:
        container = Container()
        configure(container, JarvisConfig(), engine="openai")
        fake = ScriptedInference(["hello"])
        with container.inference.override(fake):
            service = container.ask_service()
            assert isinstance(service, AskService)
            assert service.inference is fake
            assert isinstance(container.bus(), EventBus)
            assert isinstance(container.agents(), AgentRegistry)
            assert "simple" in container.agents()
            catalogue = container.tools()
            assert isinstance(catalogue, ToolCatalogue)
            assert {"memory_manage", "user_profile_manage"} <= set(catalogue.names())
            assert isinstance(container.persona(), SystemPromptBuilder)
            assert service.bus is container.bus()
        container.check_dependencies()

    async def test_every_provider_of_the_container_resolves(self) -> None:
        container = Container()
        configure(container, JarvisConfig(), engine="openai")
        resolved = {
            name: provider() for name, provider in container.providers.items() if name != "config"
        }
        assert resolved["inference"] is resolved["openai"]
        for engine in ("ollama", "vllm", "openai", "llamacpp"):
            assert resolved[engine].engine_id == engine
        assert isinstance(resolved["ask_service"], AskService)
        await aclose_engines(container)

    async def test_the_ask_service_runs_on_the_override(self) -> None:
        container = Container()
        configure(container, JarvisConfig())
        fake = ScriptedInference(["Paris."])
        container.inference.override(fake)
        answer = await container.ask_service().ask(AskQuestion(question="Capital of France?"))
        assert answer.content == "Paris."
        assert fake.requests[0].messages[-1].content == "Capital of France?"

    def test_hooks_for_tools_and_persona_reach_the_service(self) -> None:
        container = Container()
        configure(container, JarvisConfig())
        container.inference.override(ScriptedInference())

        def persona(name: str | None) -> str:
            return f"persona {name}"

        container.persona.override(persona)
        assert container.ask_service().persona is persona


class TestSelector:
    @pytest.mark.parametrize(
        ("name", "url"),
        [
            ("openai", "http://127.0.0.1:1/v1"),
            ("vllm", "http://127.0.0.1:2/v1"),
            ("ollama", "http://127.0.0.1:3"),
        ],
    )
    async def test_engine_follows_config(self, name: str, url: str) -> None:
        key = "host" if name == "ollama" else "base_url"
        config = config_with(name=name, **{name: {key: url}})
        container = Container()
        configure(container, config)
        engine = container.inference()
        assert engine.engine_id == name
        assert engine.base_url.rstrip("/") == url
        assert container.inference() is engine  # one engine (and connection pool) per container
        await aclose_engines(container)

    async def test_closing_forgets_built_engines(self) -> None:
        container = Container()
        configure(container, config_with(name="openai"))
        first = container.inference()
        await aclose_engines(container)
        assert container.inference() is not first
        await aclose_engines(container)

    def test_embedded_engine_is_selectable_without_loading_the_model(self) -> None:
        container = Container()
        configure(container, config_with(name="llamacpp"))
        engine = container.inference()
        assert engine.engine_id == "llamacpp"
        assert engine.base_url == ""

    def test_config_is_loaded_into_the_service(self) -> None:
        container = Container()
        config = validate(
            JarvisConfig,
            {"engine": {"model": "m1"}, "agent": {"default": "simple", "max_turns": 4}},
        )
        configure(container, config)
        container.inference.override(ScriptedInference())
        service = container.ask_service()
        assert service.default_model == "m1"
        assert service.default_agent == "simple"
        assert service.default_max_turns == 4

    def test_unset_max_turns_leaves_the_agents_their_own(self) -> None:
        container = Container()
        configure(container, JarvisConfig())
        container.inference.override(ScriptedInference())
        assert container.ask_service().default_max_turns is None


class TestEngineChoice:
    @pytest.mark.parametrize("name", ["openai", "vllm", "ollama"])
    async def test_explicit_engine_is_never_replaced(self, name: str) -> None:
        choice = await choose_engine(config_with(name=name))
        assert choice.name == name
        assert "chosen" in choice.reason

    async def test_auto_uses_a_reachable_ollama(self, fake_ollama: str) -> None:
        config = JarvisConfig(engine=EngineSettings(ollama=OllamaSettings(host=fake_ollama)))
        choice = await choose_engine(config)
        assert choice.name == "ollama"
        assert choice.url == fake_ollama
        assert "answered" in choice.reason

    async def test_auto_falls_back_to_the_embedded_model(self) -> None:
        host = f"http://127.0.0.1:{closed_port()}"
        config = JarvisConfig(engine=EngineSettings(ollama=OllamaSettings(host=host)))
        choice = await choose_engine(config)
        assert choice.name == "llamacpp"
        assert choice.url.endswith(".gguf")
        assert host in choice.reason

    def test_embedded_location_is_the_configured_file(self, tmp_path: Path) -> None:
        model = str(tmp_path / "m.gguf")
        config = config_with(name="llamacpp", llamacpp={"model_path": model})
        assert engine_location(config, "llamacpp") == model

    def test_unknown_engine_location_is_empty(self) -> None:
        assert engine_location(JarvisConfig(), "auto") == ""
