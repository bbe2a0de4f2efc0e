"""The tool catalogue: what it lists, builds and refuses."""

from __future__ import annotations

import pytest

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.registry import AgentRegistry
from jarvis.application.tools.calculator import CalculatorTool
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.function_tool import tool
from jarvis.application.tools.llm import LlmTool
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryMemory, InMemoryTool, ScriptedInference

ENGINE = ScriptedInference(["ok"])


def test_builtins_without_adapters() -> None:
    assert ToolCatalogue.with_builtins().names() == ["calculator", "llm", "think"]


def test_builtins_with_memory_and_adapter_tools() -> None:
    file_read = InMemoryTool(ToolSpec(name="file_read", description="Read."))
    web = InMemoryTool(ToolSpec(name="web_search", description="Search."))
    catalogue = ToolCatalogue.with_builtins(
        memory=InMemoryMemory(), file_read=file_read, web_search=web
    )
    assert catalogue.names() == [
        "calculator",
        "file_read",
        "llm",
        "retrieval",
        "think",
        "web_search",
    ]
    assert [spec.name for spec in catalogue.specs()] == catalogue.names()
    assert catalogue.specs()[0].category == "math"
    assert catalogue.build(["file_read"], inference=ENGINE, model="m") == [file_read]


def test_build_keeps_order_and_drops_repeats_and_blanks() -> None:
    catalogue = ToolCatalogue.with_builtins()
    built = catalogue.build(["think", " calculator ", "think", ""], inference=ENGINE, model="m")
    assert [t.spec.name for t in built] == ["think", "calculator"]


def test_unknown_names_are_a_configuration_error_listing_the_known_tools() -> None:
    catalogue = ToolCatalogue.with_builtins()
    with pytest.raises(ConfigurationError) as caught:
        catalogue.build(["calculator", "teleport", "fly"], inference=ENGINE, model="m")
    assert caught.value.message == "Unknown tools: 'teleport', 'fly'."
    assert caught.value.hint == "Known tools: calculator, llm, think"


def test_llm_is_built_per_run_with_the_run_engine_and_model() -> None:
    catalogue = ToolCatalogue.with_builtins()
    [built] = catalogue.build(["llm"], inference=ENGINE, model="run-model")
    assert isinstance(built, LlmTool)
    assert (built.inference, built.model) == (ENGINE, "run-model")
    pinned = ToolCatalogue.with_builtins(llm_model="sub-model")
    [other] = pinned.build(["llm"], inference=ENGINE, model="run-model")
    assert isinstance(other, LlmTool)
    assert other.model == "sub-model"


async def test_user_tools_and_plain_functions_can_be_registered() -> None:
    catalogue = ToolCatalogue.with_builtins()

    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    def whisper(text: str) -> str:
        """Lower-case the text."""
        return text.lower()

    catalogue.register(shout)
    registered = catalogue.register(whisper)
    assert registered.spec.name == "whisper"
    built = catalogue.build(["shout", "whisper"], inference=ENGINE, model="m")
    assert [(await t.execute({"text": "Hi"})).content for t in built] == ["HI", "hi"]


def test_a_taken_name_needs_replace() -> None:
    catalogue = ToolCatalogue.with_builtins()
    with pytest.raises(ConfigurationError, match="already registered"):
        catalogue.register(CalculatorTool())
    replacement = InMemoryTool(ToolSpec(name="calculator", description="Mine."))
    catalogue.register(replacement, replace=True)
    assert catalogue.build(["calculator"], inference=ENGINE, model="m") == [replacement]


def test_something_that_is_not_a_tool_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="neither a tool nor a function"):
        ToolCatalogue().register(42)  # type: ignore[arg-type]


async def test_ask_service_refuses_tools_for_an_agent_that_takes_none() -> None:
    registry = AgentRegistry()
    registry.register("simple", SimpleAgent)
    service = AskService(
        registry=registry,
        inference=ScriptedInference(["hi"]),
        default_model="m",
        tools=ToolCatalogue.with_builtins(),
    )
    with pytest.raises(ConfigurationError, match="does not take tools"):
        await service.ask(AskQuestion(question="2+2?", tools=("calculator",)))


def test_openjarvis_names_of_retrieval_are_retrieval() -> None:
    """``memory_search`` and ``memory_retrieve`` search OpenJarvis's memory as ``retrieval``
    does: they are jarvis's ``retrieval``, unless a tool is registered under that name."""
    catalogue = ToolCatalogue.with_builtins(memory=InMemoryMemory())
    names = ["memory_search", "retrieval", " memory_retrieve "]
    assert catalogue.validate(names) == ("retrieval",)
    built = catalogue.build(["memory_retrieve"], inference=ENGINE, model="m")
    assert [t.spec.name for t in built] == ["retrieval"]
    with pytest.raises(ConfigurationError, match="Unknown tool: 'memory_search'"):
        ToolCatalogue.with_builtins().validate(["memory_search"])  # no retrieval to mean
    own = InMemoryTool(ToolSpec(name="memory_search", description="An app's own."))
    catalogue.register(own)
    assert catalogue.validate(["memory_search"]) == ("memory_search",)
