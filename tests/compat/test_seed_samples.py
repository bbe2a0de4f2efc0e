"""Every Python sample of OpenJarvis's agent documentation, run with ``openjarvis``
replaced by ``jarvis`` in its imports and nothing else changed.

The samples are extracted from the documents as the test runs (:mod:`tests.compat.samples`),
so an edited sample, or a new one, fails here until it is classified below. Each runs on the
stub engine of ``bench/`` behind the Ollama protocol (``OllamaEngine(host=...)``, the engine
the documents never show how to build). The names a sample uses without importing are the
ones the documents import in another sample, or set up in prose (``engine``, ``bus``,
``model``, ``tools``, ``ctx``, ``session_store``...): :func:`prelude` gives them.

What each sample must do:

* ``ANSWERS``: it runs to the end; its ``result`` (or ``response``) is the stub's answer;
* ``REFUSED``: it runs up to a placeholder of the documents that cannot exist here (the
  folder ``/path/to/project``, ``/home/user/data``, an allowlist under ``/etc``) and stops
  there with jarvis's configuration error naming it, never a ``TypeError``;
* ``SIGNATURES``: a class outline of OpenJarvis's API; jarvis's class of that name takes
  the same parameters, with the same defaults;
* ``SKIPPED``: the reason it cannot run in a test (a fixed address).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, StubServer
from jarvis.compat.engines import OllamaEngine
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.tools.specs import ToolResult, ToolSpec
from tests.compat.samples import Sample, all_samples
from tests.support.ollama_server import OllamaProtocolServer, running_ollama_server

MODELS = ("qwen3:8b", "qwen3:1.7b", "gpt-4")

ANSWERS = {
    "agents-architecture.md:157",  # SimpleAgent(engine, model=..., bus=bus)
    "agents-architecture.md:199",  # OrchestratorAgent(..., tools=[...], max_turns=10)
    "agents-architecture.md:248",  # NativeReActAgent
    "agents-architecture.md:277",  # NativeOpenHandsAgent(..., max_turns=3, max_tokens=2048)
    "agents-architecture.md:329",  # RLMAgent(..., sub_model=..., sub_temperature=0.3)
    "agents-architecture.md:545",  # @AgentRegistry.register("my-agent"), a run() subclass
    "agents-architecture.md:559",  # AgentRegistry.keys()
    "agents-architecture.md:568",  # AgentRegistry.create(key, engine, model, **kw)
    "agents-user-guide.th.md:321",  # Jarvis().ask / ask_full(...)["content"]
    "agents-user-guide.th.md:483",  # OperativeAgent(operator_id=..., session_store=...)
    "agents-user-guide.th.md:542",  # MonitorOperativeAgent(four strategy axes)
    "agents-user-guide.th.md:637",  # AgentRegistry.contains / get / keys
}
REFUSED = {
    # source: (the placeholder named, a name the sample had bound before it stopped)
    "agents-architecture.md:358": ("/path/to/project", "agent"),  # OpenHandsAgent
    "agents-architecture.md:399": ("/path/to/project", "agent"),  # ClaudeCodeAgent(engine=None)
    "agents-architecture.md:441": ("/home/user/data", "runner"),  # ContainerRunner + Sandboxed
    "agents-user-guide.th.md:387": ("/path/to/project", "agent"),  # ClaudeCode(allowed_tools)
    "agents-user-guide.th.md:435": ("/path/to/project", "agent"),  # OpenCodeAgent
    "agents-user-guide.th.md:586": ("/etc/openjarvis/mount_allowlist.json", "engine"),
}
SIGNATURES = {
    "agents-architecture.md:14": ("BaseAgent", "jarvis.agents._stubs"),
    "agents-architecture.md:94": ("ToolUsingAgent", "jarvis.agents._stubs"),
    "agents-user-guide.th.md:77": ("BaseAgent", "jarvis.agents._stubs"),
    "agents-architecture.md:68": ("AgentContext AgentResult", "jarvis.agents._stubs"),
    "agents-architecture.md:468": ("BaseTool", "jarvis.tools._stubs"),
    "agents-architecture.md:499": ("ToolExecutor", "jarvis.tools._stubs"),
}
SKIPPED = {
    "agents-user-guide.th.md:710": "plain httpx against the fixed address localhost:8000 and "
    "a literal {id}; the same request is tested in "
    "tests/unit/entrypoints/http/test_serve_managed.py",
}


def test_every_sample_is_classified() -> None:
    """A sample added to or moved in the documents fails here until it is classified."""
    sources = {sample.source for sample in all_samples()}
    assert sources == {*ANSWERS, *REFUSED, *SIGNATURES, *SKIPPED}


@pytest.fixture
def ollama_on_stub(stub_server: StubServer) -> Iterator[OllamaProtocolServer]:
    with running_ollama_server(stub_server.url, "stub-model", models=MODELS) as server:
        yield server


def prelude(ollama: OllamaProtocolServer) -> dict[str, object]:
    """The names the samples use without importing them (see the module docstring)."""
    from jarvis.agents.operative import OperativeAgent
    from jarvis.agents.simple import SimpleAgent
    from jarvis.core.events import EventBus
    from jarvis.core.registry import AgentRegistry
    from jarvis.core.types import AgentContext
    from jarvis.engine.ollama import OllamaEngine
    from jarvis.tools.calculator import CalculatorTool
    from jarvis.tools.think import ThinkTool

    class WebSearchTool:
        """Never imported by the documents; a loopback stand-in named ``web_search`` so
        that no test reaches the network (the sample's URL prefetch goes through it)."""

        spec = ToolSpec(
            name="web_search",
            description="Search the web or fetch a URL.",
            parameters={"type": "object", "properties": {"query": {"type": "string"}}},
            category="search",
        )

        async def execute(self, arguments: JSONObject) -> ToolResult:
            return ToolResult(tool_name="web_search", content="Example Domain.")

    return {
        "engine": OllamaEngine(host=ollama.url, timeout=60),
        "bus": EventBus(),
        "model": "qwen3:8b",
        "tools": [CalculatorTool(), ThinkTool()],
        "ctx": AgentContext(metadata={"context": "A document about capitals: Paris."}),
        "session_store": None,
        "memory_backend": None,
        "SimpleAgent": SimpleAgent,
        "OperativeAgent": OperativeAgent,
        "AgentRegistry": AgentRegistry,
        "CalculatorTool": CalculatorTool,
        "ThinkTool": ThinkTool,
        "WebSearchTool": WebSearchTool,
    }


def by_source(source: str) -> Sample:
    return next(s for s in all_samples() if s.source == source)


@pytest.fixture
def configured(jarvis_home: Path, ollama_on_stub: OllamaProtocolServer) -> OllamaProtocolServer:
    """``Jarvis()`` reads the configuration: the same engine, by OpenJarvis's keys."""
    (jarvis_home / "config.toml").write_text(
        f'[engine]\ndefault = "ollama"\n[engine.ollama]\nhost = "{ollama_on_stub.url}"\n'
        '[intelligence]\ndefault_model = "qwen3:8b"\n',
        encoding="utf-8",
    )
    return ollama_on_stub


@pytest.mark.parametrize("source", sorted(ANSWERS))
def test_sample_answers(
    source: str, configured: OllamaProtocolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from jarvis.core.registry import AgentRegistry

    namespace = prelude(configured)
    try:
        exec(compile(by_source(source).as_jarvis(), source, "exec"), namespace)
    finally:
        AgentRegistry.unregister("my-agent")
    result = namespace.get("result", namespace.get("response"))
    if result is not None:
        content = result["content"] if isinstance(result, dict) else getattr(result, "content")  # noqa: B009
        assert ANSWER in str(content)
    printed = capsys.readouterr().out
    if "print(" in by_source(source).code:
        assert printed.strip()


def test_registered_agent_is_listed_and_runs_its_own_run(
    configured: OllamaProtocolServer,
) -> None:
    from jarvis.core.registry import AgentRegistry

    namespace = prelude(configured)
    try:
        exec(by_source("agents-architecture.md:545").as_jarvis(), namespace)
        assert "my-agent" in AgentRegistry.keys()  # noqa: SIM118  # the documented call
        engine = namespace["engine"]
        assert isinstance(engine, OllamaEngine)
        agent = AgentRegistry.create("my-agent", engine, "qwen3:8b")
        assert agent.run("hi") is None  # its run() is the sample's `...`
    finally:
        AgentRegistry.unregister("my-agent")


def test_sdk_sample_results_read_as_mappings(configured: OllamaProtocolServer) -> None:
    namespace = prelude(configured)
    exec(by_source("agents-user-guide.th.md:321").as_jarvis(), namespace)
    result = namespace["result"]
    assert result["content"] == ANSWER  # type: ignore[index]
    assert result["turns"] == 2  # type: ignore[index]  # a calculator call, then the answer
    assert [t["tool_name"] for t in result["tool_results"]] == ["calculator"]  # type: ignore[index]


@pytest.mark.parametrize("source", sorted(REFUSED))
def test_sample_stops_at_its_placeholder(source: str, configured: OllamaProtocolServer) -> None:
    from jarvis.domain.errors import ConfigurationError

    namespace = prelude(configured)
    with pytest.raises(ConfigurationError) as refused:
        exec(compile(by_source(source).as_jarvis(), source, "exec"), namespace)
    placeholder, bound = REFUSED[source]
    assert placeholder in str(refused.value)
    assert bound in namespace  # what comes before the placeholder ran


@pytest.mark.parametrize("source", sorted(SIGNATURES))
def test_outline_matches_jarvis_class(source: str) -> None:
    import importlib
    from abc import ABC, abstractmethod
    from dataclasses import dataclass, fields
    from typing import Any, Dict, List, Optional  # noqa: UP035  # the outlines' names

    from jarvis.core.events import EventBus
    from jarvis.core.types import AgentContext, AgentResult, ToolResult
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.domain.ports import InferencePort, ToolPort

    names, module = SIGNATURES[source]
    outline: dict[str, object] = {
        "ABC": ABC,
        "abstractmethod": abstractmethod,
        "dataclass": dataclass,
        "Any": Any,
        "Dict": Dict,  # noqa: UP006
        "List": List,  # noqa: UP006
        "Optional": Optional,
        "EventBus": EventBus,
        "InferenceEngine": InferencePort,
        "BaseTool": ToolPort,
        "Conversation": tuple,
        "AgentContext": AgentContext,
        "AgentResult": AgentResult,
        "ToolResult": ToolResult,
        "ToolCall": ToolCall,
        "ToolSpec": ToolSpec,
        "BaseAgent": importlib.import_module("jarvis.agents._stubs").BaseAgent,
    }
    exec(by_source(source).as_jarvis(), outline)
    ours = importlib.import_module(module)
    for name in names.split():
        theirs, mine = outline[name], getattr(ours, name)
        assert isinstance(theirs, type)
        if "__dataclass_fields__" in vars(theirs):
            assert {f.name for f in fields(theirs)} <= {f.name for f in fields(mine)}
            continue
        for method in ("__init__", "run", "execute", "to_openai_function", "get_openai_tools"):
            if method not in vars(theirs):
                continue
            expected = _parameters(getattr(theirs, method))
            assert _parameters(getattr(mine, method)) == expected, (name, method)


def _parameters(function: object) -> list[tuple[str, object, object]]:
    assert callable(function)
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD or p.name
    ]


def test_an_openjarvis_style_tool_runs_in_an_agent_and_the_executor(
    configured: OllamaProtocolServer,
) -> None:
    from jarvis.agents.orchestrator import OrchestratorAgent
    from jarvis.domain.llm.messages import ToolCall
    from jarvis.tools._stubs import BaseTool, ToolExecutor

    class Doubler(BaseTool):
        tool_id = "doubler"

        @property
        def spec(self) -> ToolSpec:
            return ToolSpec(
                name="doubler",
                description="Double a number written as an expression.",
                parameters={
                    "type": "object",
                    "properties": {"expression": {"type": "string"}},
                    "required": ["expression"],
                },
            )

        def execute(self, **params: JSONValue) -> ToolResult:
            return ToolResult(tool_name="doubler", content=str(params["expression"]) * 2)

    engine = prelude(configured)["engine"]
    assert isinstance(engine, OllamaEngine)
    result = OrchestratorAgent(engine, model="qwen3:8b", tools=[Doubler()]).run("go")
    assert result.content == ANSWER
    assert [(t.tool_name, t.content) for t in result.tool_results] == [("doubler", "2+22+2")]
    executor = ToolExecutor([Doubler()])
    done = executor.execute(ToolCall(id="c", name="doubler", arguments={"expression": "ab"}))
    assert (done.success, done.content) == (True, "abab")
    refused = executor.execute(ToolCall(id="d", name="doubler", arguments={}))
    assert not refused.success  # the schema is checked before the tool runs
    assert executor.get_openai_tools()[0]["function"] == {
        "name": "doubler",
        "description": "Double a number written as an expression.",
        "parameters": Doubler().spec.parameters,
    }
