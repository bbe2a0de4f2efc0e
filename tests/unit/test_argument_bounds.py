"""A request made whole to a server that ignores ``max_tokens`` offers its tools with
bounded arguments: the server's grammar (built from the schema) then bounds the call."""

from __future__ import annotations

from jarvis.adapters.inference._argument_bounds import (
    CHARS_PER_TOKEN,
    bounded_schema,
    with_bounded_arguments,
)
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject
from jarvis.domain.messages import Message
from jarvis.domain.tools import ToolSpec

SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "short": {"type": "string", "maxLength": 5},
        "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        "type": {"type": "integer"},
        "nested": {"type": "object", "properties": {"deep": {"type": "string"}}},
    },
    "required": ["thought"],
}


def test_every_string_and_array_gets_a_bound_and_tighter_ones_are_kept() -> None:
    bounded = bounded_schema(SCHEMA, 10)
    properties = bounded["properties"]
    assert isinstance(properties, dict)
    limit = CHARS_PER_TOKEN * 10
    assert properties["thought"] == {"type": "string", "maxLength": limit}
    assert properties["short"] == {"type": "string", "maxLength": 5}
    assert properties["tags"] == {
        "type": "array",
        "items": {"type": ["string", "null"], "maxLength": limit},
        "maxItems": 10,
    }
    assert properties["type"] == {"type": "integer"}  # a property named "type" is no type
    assert properties["nested"] == {
        "type": "object",
        "properties": {"deep": {"type": "string", "maxLength": limit}},
    }
    assert bounded["required"] == ["thought"]
    assert "maxLength" not in str(SCHEMA["properties"]).replace("'maxLength': 5", "")


def test_the_request_keeps_everything_but_the_tools_schemas() -> None:
    tool = ToolSpec(name="think", description="Think.", parameters=SCHEMA)
    request = InferenceRequest(
        messages=(Message.user("q"),), model="m", max_tokens=4, tools=(tool,)
    )
    bounded = with_bounded_arguments(request)
    assert bounded.messages == request.messages
    assert bounded.max_tokens == 4
    [spec] = bounded.tools
    assert spec.name == "think"
    assert spec.description == "Think."
    assert f"'maxLength': {4 * CHARS_PER_TOKEN}" in str(spec.parameters)
    plain = InferenceRequest(messages=(Message.user("q"),), model="m")
    assert with_bounded_arguments(plain) is plain
