"""How ``jarvis tools`` describes a tool: its parameters, as text and as JSON.

Loaded when the command runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.tools` among them), not this one.
"""

from __future__ import annotations

from jarvis.domain.approvals import effects_of
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.descriptions import describe_type
from jarvis.domain.tools.specs import ToolSpec


def parameters(spec: ToolSpec) -> list[JSONObject]:
    """Each parameter of ``spec``: its name, type (in words), whether it is required, and
    its description."""
    properties = spec.parameters.get("properties")
    required = spec.parameters.get("required")
    needed = set(required) if isinstance(required, list) else set()
    rows: list[JSONObject] = []
    if isinstance(properties, dict):
        for name, schema in properties.items():
            description = schema.get("description", "") if isinstance(schema, dict) else ""
            rows.append(
                {
                    "name": name,
                    "type": describe_type(schema),
                    "required": name in needed,
                    "description": description if isinstance(description, str) else "",
                }
            )
    return rows


def describe_tool(spec: ToolSpec) -> str:
    """``spec`` as ``jarvis tools`` lists it: name, category, description, parameters."""
    heading = f"{spec.name} [{spec.category}]" if spec.category else spec.name
    lines = [heading, f"  {spec.description.strip()}"]
    rows = parameters(spec)
    for row in rows:
        flag = ", required" if row["required"] else ""
        line = f"  - {row['name']} ({row['type']}{flag})"
        if row["description"]:
            line += f": {row['description']}"
        lines.append(line)
    if not rows:
        lines.append("  (no parameters)")
    return "\n".join(lines)


def tool_json(spec: ToolSpec, server: str | None) -> dict[str, object]:
    """``jarvis tools --json``'s entry for ``spec`` (``server``: the MCP server it comes
    from, if any)."""
    return {
        "name": spec.name,
        "server": server,
        "category": spec.category,
        "description": spec.description,
        "side_effects": spec.side_effects,
        "effects": effects_of(spec),
        "timeout_seconds": spec.timeout_seconds,
        "parameters": parameters(spec),
        "schema": spec.parameters,
    }
