"""The behaviour every ToolPort implementation shows: built-ins, adapters, fakes, user tools.

A subclass provides the ``tool`` fixture and ``valid_arguments`` (schema-valid arguments
the tool answers successfully); ``failing_arguments`` (schema-valid arguments the tool must
refuse) is optional. A tool's expected failures are results, never exceptions, so a model
can read them and try again.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Generic, TypeVar

import pytest

from jarvis.adapters.inference._openai_wire import tool_to_openai
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.ports import ToolPort
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.tools.specs import ToolResult

ToolT = TypeVar("ToolT", bound=ToolPort)

ENGINE_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SCHEMA_SHAPES = frozenset({"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"})


class ToolContract(Generic[ToolT]):
    @pytest.fixture
    def tool(self) -> ToolT:
        raise NotImplementedError("subclass must provide the `tool` fixture")

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        raise NotImplementedError("subclass must provide the `valid_arguments` fixture")

    @pytest.fixture
    def failing_arguments(self) -> JSONObject | None:
        """Schema-valid arguments the tool must answer with ``success=False``; None = none."""
        return None

    # -- the spec -------------------------------------------------------------------------

    def test_the_name_is_one_engines_accept(self, tool: ToolT) -> None:
        assert ENGINE_TOOL_NAME.match(tool.spec.name)

    def test_the_description_says_something(self, tool: ToolT) -> None:
        assert tool.spec.description.strip()

    def test_the_spec_is_stable(self, tool: ToolT) -> None:
        assert tool.spec == tool.spec

    def test_the_timeout_is_positive(self, tool: ToolT) -> None:
        assert tool.spec.timeout_seconds > 0

    def test_parameters_are_an_object_schema(self, tool: ToolT) -> None:
        parameters = tool.spec.parameters
        assert parameters.get("type") == "object"
        properties = parameters.get("properties", {})
        assert isinstance(properties, dict)
        for name, schema in properties.items():
            assert isinstance(schema, dict), name
            assert _SCHEMA_SHAPES & schema.keys() or schema == {}, name
        required = parameters.get("required", [])
        assert isinstance(required, list)
        assert set(map(str, required)) <= properties.keys()

    def test_the_openai_rendering_is_json(self, tool: ToolT) -> None:
        rendered = json.loads(json.dumps(tool_to_openai(tool.spec)))
        assert rendered["type"] == "function"
        assert rendered["function"]["name"] == tool.spec.name
        assert rendered["function"]["parameters"] == tool.spec.parameters

    def test_the_valid_arguments_satisfy_the_schema(
        self, tool: ToolT, valid_arguments: JSONObject
    ) -> None:
        assert validate(valid_arguments, tool.spec.parameters) == []

    # -- execution ------------------------------------------------------------------------

    async def test_valid_arguments_give_a_successful_result(
        self, tool: ToolT, valid_arguments: JSONObject
    ) -> None:
        result = await tool.execute(dict(valid_arguments))
        assert isinstance(result, ToolResult)
        assert result.tool_name == tool.spec.name
        assert isinstance(result.content, str)
        assert result.success, result.content

    async def test_refused_input_is_a_failed_result_not_an_exception(
        self, tool: ToolT, failing_arguments: JSONObject | None
    ) -> None:
        if failing_arguments is None:
            pytest.skip("this tool has no schema-valid input it refuses")
        assert validate(failing_arguments, tool.spec.parameters) == []
        result = await tool.execute(dict(failing_arguments))
        assert result.tool_name == tool.spec.name
        assert not result.success
        assert result.content.strip()

    async def test_calls_run_through_the_executor(
        self, tool: ToolT, valid_arguments: JSONObject
    ) -> None:
        executor = ToolExecutor([tool])
        call = ToolCall(id="call-1", name=tool.spec.name, arguments=dict(valid_arguments))
        result = await executor.execute(call)
        assert result.success, result.content
        assert result.call_id == "call-1"
        assert result.tool_name == tool.spec.name

    async def test_concurrent_calls_are_independent(
        self, tool: ToolT, valid_arguments: JSONObject
    ) -> None:
        results = await asyncio.gather(*(tool.execute(dict(valid_arguments)) for _ in range(3)))
        assert all(r.success for r in results)
        assert len({r.content for r in results}) == 1
