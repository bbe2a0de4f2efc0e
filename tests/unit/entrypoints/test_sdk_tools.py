"""Tools through the SDK: built-ins by name, the application's own functions, late registration."""

from __future__ import annotations

import pytest

from jarvis import Jarvis, tool
from jarvis.domain.errors import ConfigurationError, ToolError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference


def call(name: str, **arguments: str | int) -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id="c1", name=name, arguments=dict(arguments)),),
        finish_reason="tool_calls",
    )


@tool
def order_status(order_id: int) -> dict[str, object]:
    """Where an order is.

    Args:
        order_id: The order number.
    """
    return {"order": order_id, "status": "shipped"}


def test_builtin_tools_by_name() -> None:
    engine = ScriptedInference([call("calculator", expression="2**64"), "Done."])
    with Jarvis(inference=engine) as j:
        answer = j.ask_full("2**64?", agent="orchestrator", tools=["calculator"])
    assert answer.content == "Done."
    assert [r.content for r in answer.tool_results] == [str(2**64)]


def test_tools_given_to_the_instance_are_its_default_tools() -> None:
    engine = ScriptedInference([call("order_status", order_id=42), "Order 42 has shipped."])
    with Jarvis(inference=engine, agent="orchestrator", tools=[order_status]) as j:
        answer = j.ask_full("Where is order 42?")
    assert answer.content == "Order 42 has shipped."
    [result] = answer.tool_results
    assert result.content == '{"order": 42, "status": "shipped"}'
    assert [spec.name for spec in engine.requests[0].tools] == ["order_status"]


def test_plain_functions_are_registered_before_and_after_the_first_question() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    def whisper(text: str) -> str:
        """Lower-case the text."""
        return text.lower()

    engine = ScriptedInference(
        ["warm-up", call("shout", text="hi"), "HI", call("whisper", text="HEY"), "hey"]
    )
    with Jarvis(inference=engine, agent="orchestrator") as j:
        assert j.register_tool(shout).spec.name == "shout"
        assert j.ask("first") == "warm-up"
        j.register_tool(whisper)
        assert j.ask_full("loud", tools=["shout"]).tool_results[0].content == "HI"
        assert j.ask_full("quiet", tools=["whisper"]).tool_results[0].content == "hey"


def test_bad_tools_are_refused_clearly() -> None:
    def undocumented(x: int) -> int:
        return x

    with pytest.raises(ToolError, match="no description"):
        Jarvis(inference=ScriptedInference(), tools=[undocumented])
    with Jarvis(inference=ScriptedInference(), agent="orchestrator") as j:
        with pytest.raises(ConfigurationError, match="Unknown tool: 'nope'"):
            j.ask("q", tools=["nope"])
        j.register_tool(order_status)
        with pytest.raises(ConfigurationError, match="already registered"):
            j.register_tool(order_status)
        j.ask("warm-up")
        with pytest.raises(ConfigurationError, match="already registered"):
            j.register_tool(order_status)
