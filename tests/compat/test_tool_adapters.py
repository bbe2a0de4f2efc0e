"""OpenJarvis's tool API over jarvis's tools: the built-ins are ``BaseTool`` subclasses with a
synchronous ``execute(**params)`` and ``to_openai_function()``, and ``ToolExecutor`` takes
OpenJarvis's JSON-text arguments (the seed's "JSON argument parsing")."""

from __future__ import annotations

import asyncio

import pytest

from jarvis import Jarvis
from jarvis.application.tools.calculator import CALCULATOR_SPEC
from jarvis.application.tools.calculator import CalculatorTool as JarvisCalculator
from jarvis.core.types import ToolCall, ToolResult
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.tools.specs import ToolSpec, openai_function
from jarvis.testing import ScriptedInference
from jarvis.tools._stubs import BaseTool, ToolExecutor
from jarvis.tools.calculator import CalculatorTool
from jarvis.tools.think import ThinkTool
from jarvis.tools.web_search import WebSearchTool


def test_builtins_are_base_tools_with_a_synchronous_execute() -> None:
    calculator = CalculatorTool()
    assert isinstance(calculator, BaseTool)
    assert isinstance(ThinkTool(), BaseTool)
    assert isinstance(WebSearchTool(), BaseTool)
    done = calculator.execute(expression="2+2")
    assert isinstance(done, ToolResult)
    assert (done.tool_name, done.content, done.success) == ("calculator", "4", True)
    thought = ThinkTool().execute(thought="step one")
    assert (thought.tool_name, thought.content, thought.success) == ("think", "step one", True)


def test_to_openai_function_is_jarvis_tools_spec() -> None:
    assert CalculatorTool().to_openai_function() == openai_function(CALCULATOR_SPEC)
    assert ThinkTool().to_openai_function()["function"]["name"] == "think"  # type: ignore[index,call-overload]


def test_wrong_parameters_are_a_failed_result() -> None:
    missing = CalculatorTool().execute()
    assert not missing.success
    assert "missing required property 'expression'" in missing.content
    refused = CalculatorTool().execute(expression="__import__('os')")
    assert not refused.success


def test_execute_works_inside_a_running_event_loop() -> None:
    async def inside() -> ToolResult:
        return CalculatorTool().execute(expression="6*7")

    assert asyncio.run(inside()).content == "42"


def test_the_wrapper_is_jarvis_own_tool_for_agents() -> None:
    assert isinstance(CalculatorTool().as_tool(), JarvisCalculator)


class Doubler(BaseTool):
    """An OpenJarvis-style tool of the application's own: a synchronous ``execute``."""

    tool_id = "doubler"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="doubler",
            description="Double a text.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )

    def execute(self, **params: JSONValue) -> ToolResult:
        return ToolResult(tool_name="doubler", content=str(params["text"]) * 2)


def test_the_sdk_takes_an_openjarvis_style_tool() -> None:
    call = ToolCall(id="c1", name="doubler", arguments={"text": "ab"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "Done."]
    )
    with Jarvis(inference=engine, tools=[Doubler()]) as j:  # type: ignore[list-item]
        answer = j.ask_full("double ab", agent="orchestrator", tools=["doubler"])
    assert [r.content for r in answer.tool_results] == ["abab"]


@pytest.mark.parametrize(
    ("arguments", "success", "content"),
    [
        ('{"expression": "2+2"}', True, "4"),
        ('{"expression": ', False, "they are not valid JSON"),
        ("[1, 2]", False, "they are not a JSON object"),
        ("", False, "missing required property 'expression'"),
        ("x" * 1_000_001, False, "more than the 1,000,000 accepted"),
        ({"expression": "3*3"}, True, "9"),
    ],
    ids=["json-text", "bad-json", "not-an-object", "empty", "too-long", "object"],
)
def test_executor_parses_json_text_arguments(
    arguments: object, success: bool, content: str
) -> None:
    executor = ToolExecutor([CalculatorTool(), ThinkTool()])
    result = executor.execute(ToolCall(id="c1", name="calculator", arguments=arguments))  # type: ignore[arg-type]
    assert result.success is success
    assert content in result.content
    assert result.tool_name == "calculator"


@pytest.mark.parametrize("name", [None, 7, ["calculator"]], ids=["none", "number", "list"])
def test_a_call_whose_name_is_not_text_is_a_failed_result(name: object) -> None:
    """The executor never raises for a bad call: a name of another type included."""
    executor = ToolExecutor([CalculatorTool()])
    result = executor.execute(ToolCall(id="c1", name=name, arguments="{}"))  # type: ignore[arg-type]
    assert not result.success
    assert "not a string" in result.content


def test_an_openjarvis_style_agent_gives_well_formed_text() -> None:
    """An application's own engine (or tool) can hand back a lone surrogate: the agent's
    result and stream hold U+FFFD, as the SDK's and the CLI's do, so printing them works."""
    import asyncio

    from jarvis.compat.agents import SimpleAgent
    from jarvis.domain.run.updates import TextDelta
    from jarvis.testing import ScriptedInference

    result = SimpleAgent(ScriptedInference(["half \ud800 done"]), "m").run("q")
    assert result.content == "half \ufffd done"

    async def streamed() -> str:
        agent = SimpleAgent(ScriptedInference(["more \udfff here"]), "m")
        pieces = [u.text async for u in agent.astream("q") if isinstance(u, TextDelta)]
        return "".join(pieces)

    assert asyncio.run(streamed()) == "more \ufffd here"
