"""Tool descriptions for text protocols: name, description, category, typed parameters."""

from __future__ import annotations

from jarvis.domain.tools.descriptions import build_tool_descriptions, describe_type
from jarvis.domain.tools.specs import ToolSpec


def test_each_tool_lists_its_parameters_with_type_and_required() -> None:
    specs = [
        ToolSpec(
            name="calculator",
            description="Evaluate arithmetic.",
            category="math",
            parameters={
                "type": "object",
                "properties": {
                    "expression": {"type": "string", "description": "e.g. 2+2"},
                    "digits": {"type": "integer"},
                },
                "required": ["expression"],
            },
        ),
        ToolSpec(name="now", description="The time."),
    ]
    assert build_tool_descriptions(specs) == (
        "### calculator\n"
        "Evaluate arithmetic.\n"
        "Category: math\n"
        "Parameters:\n"
        "  - expression (string, required): e.g. 2+2\n"
        "  - digits (integer)\n"
        "\n"
        "### now\n"
        "The time.\n"
        "Parameters: none"
    )


def test_no_tools_and_type_rendering() -> None:
    assert build_tool_descriptions([]) == "No tools available."
    assert describe_type({"type": "array", "items": {"type": "integer"}}) == "array of integer"
    assert describe_type({"enum": ["a", 1]}) == '"a" | 1'
    assert describe_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string or null"
    assert describe_type({"type": ["string", "null"]}) == "string or null"
    assert describe_type({"$ref": "#/$defs/X"}) == "object"
    assert describe_type(None) == "any"
