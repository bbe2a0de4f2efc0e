"""Declaring tools from typed functions: the schema, validation, execution and rendering."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from jarvis.application.tools.docstrings import parse_docstring
from jarvis.application.tools.function_tool import FunctionTool, render_result, tool
from jarvis.domain.errors import ToolError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.tools.specs import ToolResult


@tool(category="weather", timeout_seconds=5.0)
def forecast(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> dict[str, object]:
    """Temperature forecast for a city.

    Uses the cached model.

    Args:
        city: The city name,
            e.g. "Lisbon".
        days: How many days ahead.
        unit (str): Celsius or Fahrenheit.

    Returns:
        The forecast.
    """
    return {"city": city, "days": days, "unit": unit}


def test_the_spec_comes_from_the_signature_and_docstring() -> None:
    spec = forecast.spec
    assert spec.name == "forecast"
    assert spec.description == "Temperature forecast for a city.\n\nUses the cached model."
    assert spec.category == "weather"
    assert spec.timeout_seconds == 5.0
    assert not spec.side_effects
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'The city name, e.g. "Lisbon".'},
            "days": {"type": "integer", "default": 1, "description": "How many days ahead."},
            "unit": {
                "type": "string",
                "enum": ["c", "f"],
                "default": "c",
                "description": "Celsius or Fahrenheit.",
            },
        },
        "required": ["city"],
        "additionalProperties": False,
    }


async def test_arguments_are_validated_and_coerced() -> None:
    result = await forecast.execute({"city": "Lisbon", "days": "3"})
    assert result.success
    assert result.content == '{"city": "Lisbon", "days": 3, "unit": "c"}'
    bad = await forecast.execute({"city": 7, "unit": "k", "color": "red"})
    assert not bad.success
    assert bad.tool_name == "forecast"
    assert "city: Input should be a valid string" in bad.content
    assert "unit: Input should be 'c' or 'f'" in bad.content
    assert "color: unknown argument" in bad.content
    missing = await forecast.execute({})
    assert "city: Field required" in missing.content


def test_the_decorated_function_still_works() -> None:
    assert forecast("Porto", days=2) == {"city": "Porto", "days": 2, "unit": "c"}
    assert isinstance(forecast, FunctionTool)


async def test_sync_functions_run_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        """Which thread runs me."""
        seen.append(threading.get_ident())
        return "done"

    assert (await where.execute({})).content == "done"
    assert seen
    assert seen[0] != threading.get_ident()


async def test_a_non_blocking_sync_function_runs_on_the_loop_in_the_callers_task() -> None:
    seen: list[tuple[int, asyncio.Task[object] | None]] = []

    @tool(blocking=False)
    def here() -> str:
        """Where I run."""
        seen.append((threading.get_ident(), asyncio.current_task()))
        return "done"

    assert here.spec.blocking is False
    assert tool(lambda_free).spec.blocking is True
    executor = ToolExecutor([here])
    result = await executor.execute(ToolCall(id="1", name="here"))
    assert (result.content, result.success) == ("done", True)
    # no worker thread, and no task of its own from the executor either
    assert seen == [(threading.get_ident(), asyncio.current_task())]


async def test_a_non_blocking_tool_that_raises_is_a_failed_result() -> None:
    @tool(blocking=False)
    def broken() -> str:
        """Fails."""
        raise RuntimeError("no luck")

    result = await ToolExecutor([broken]).execute(ToolCall(id="1", name="broken"))
    assert not result.success
    assert "RuntimeError: no luck" in result.content


def lambda_free() -> str:
    """A plain function."""
    return ""


async def test_async_functions_are_awaited() -> None:
    @tool(name="slow-echo", description="Echo after a pause.")
    async def echo(text: str, pause: float = 0.01) -> str:
        await asyncio.sleep(pause)
        return text.upper()

    assert echo.spec.name == "slow-echo"
    assert echo.spec.description == "Echo after a pause."
    assert (await echo.execute({"text": "hi"})).content == "HI"


class Point(BaseModel):
    x: int
    y: int = 0


class Node(BaseModel):
    value: int
    children: list[Node] = []


@dataclass
class Reading:
    sensor: str
    value: float


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("as is", "as is"),
        (None, "(no output)"),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        ({"a": [1, "ü"]}, '{"a": [1, "ü"]}'),
        ([1, 2], "[1, 2]"),
        (Point(x=1), '{"x": 1, "y": 0}'),
        (Reading("t1", 20.5), '{"sensor": "t1", "value": 20.5}'),
    ],
)
def test_results_are_rendered_as_text(value: object, text: str) -> None:
    assert render_result(value) == text


async def test_nested_models_are_inlined_and_recursive_ones_kept_as_refs() -> None:
    @tool
    def place(
        where: Point, tag: Annotated[str, Field(description="A label.", max_length=8)]
    ) -> str:
        """Place a point."""
        return f"{where.x},{where.y}:{tag}"

    properties = place.spec.parameters["properties"]
    assert isinstance(properties, dict)
    assert properties["where"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert properties["tag"] == {"type": "string", "maxLength": 8, "description": "A label."}
    assert "$defs" not in place.spec.parameters
    assert (await place.execute({"where": {"x": 2}, "tag": "a"})).content == "2,0:a"
    assert not (await place.execute({"where": {"x": 2}, "tag": "too long!"})).success

    @tool
    def depth(tree: Node) -> int:
        """Depth of a tree."""
        return 1 + max((depth(c) for c in tree.children), default=0)

    schema = depth.spec.parameters
    assert "Node" in schema["$defs"]  # type: ignore[operator]
    arguments: JSONObject = {
        "tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}
    }
    assert validate(arguments, schema) == []
    assert (await depth.execute(arguments)).content == "3"


async def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    @tool
    def clash(json: str, schema: int, model_config: bool = False, title: str = "") -> str:
        """Parameters named like BaseModel attributes."""
        return f"{json}|{schema}|{model_config}|{title}"

    properties = clash.spec.parameters["properties"]
    assert isinstance(properties, dict)
    assert list(properties) == ["json", "schema", "model_config", "title"]
    assert properties["title"] == {"type": "string", "default": ""}
    result = await clash.execute({"json": "j", "schema": 2, "title": "t"})
    assert result.content == "j|2|False|t"


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def power(base: int, /, exponent: int = 2) -> int:
        """Raise base to exponent."""
        return int(base**exponent)

    assert (await power.execute({"base": 3, "exponent": 3})).content == "27"


async def test_exceptions_become_failed_results() -> None:
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    result = await explode.execute({"reason": "no stock"})
    assert not result.success
    assert result.content == "Error: ValueError: no stock"


async def test_a_returned_tool_result_is_kept_under_the_tool_name() -> None:
    @tool
    def refuse() -> ToolResult:
        """Refuses politely."""
        return ToolResult(tool_name="whatever", content="not today", success=False)

    result = await refuse.execute({})
    assert (result.tool_name, result.content, result.success) == ("refuse", "not today", False)


async def test_function_tools_run_through_the_executor() -> None:
    executor = ToolExecutor([forecast])
    ok = await executor.execute(ToolCall(id="1", name="forecast", arguments={"city": "Faro"}))
    assert ok.success
    assert '"Faro"' in ok.content
    wrong = await executor.execute(ToolCall(id="2", name="forecast", arguments={"days": 2}))
    assert not wrong.success
    assert "city" in wrong.content


def test_functions_that_cannot_be_tools_are_refused_when_declared() -> None:
    def no_doc(x: int) -> int:
        return x

    def untyped(x):  # type: ignore[no-untyped-def]
        """Untyped."""

    def variadic(*items: int) -> int:
        """Variadic."""
        return 0

    def keywords(**options: str) -> str:
        """Keywords."""
        return ""

    with pytest.raises(ToolError, match="no description"):
        FunctionTool.from_function(no_doc)
    assert FunctionTool.from_function(no_doc, description="Identity.").spec.description
    with pytest.raises(ToolError, match="no type annotation"):
        FunctionTool.from_function(untyped)
    with pytest.raises(ToolError, match=r"\*items"):
        FunctionTool.from_function(variadic)
    with pytest.raises(ToolError, match=r"\*\*options"):
        FunctionTool.from_function(keywords)
    with pytest.raises(ToolError, match="Invalid tool name"):
        FunctionTool.from_function(no_doc, name="has space", description="x")
    with pytest.raises(ToolError, match="Invalid tool name"):
        FunctionTool.from_function(no_doc, name="x" * 65, description="x")


def test_side_effects_are_declared() -> None:
    @tool(side_effects=True)
    def delete(path: str) -> None:
        """Delete a file."""

    assert delete.spec.side_effects


def test_sphinx_and_numpy_docstrings_are_understood() -> None:
    sphinx = parse_docstring(
        """Send a message.

        :param to: Recipient address.
        :param str body: The text,
            possibly long.
        :returns: The message id.
        """
    )
    assert sphinx.description == "Send a message."
    assert sphinx.parameters == {"to": "Recipient address.", "body": "The text, possibly long."}
    numpy = parse_docstring(
        """Resize an image.

        Parameters
        ----------
        width : int
            New width in pixels.
        height : int
            New height.

        Returns
        -------
        bool
        """
    )
    assert numpy.description == "Resize an image."
    assert numpy.parameters == {"width": "New width in pixels.", "height": "New height."}
    assert parse_docstring(None).description == ""
