"""Tool descriptions for text protocols (ReAct, structured text), where the model reads the
tools from the system prompt instead of receiving them as function definitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jarvis.domain.tools.specs import ToolSpec


def describe_type(schema: object) -> str:
    """A short human rendering of a parameter schema's type: ``string``, ``array of
    integer``, ``"a" | "b"``, ``string or null``."""
    if not isinstance(schema, Mapping):
        return "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(_literal(v) for v in enum)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {describe_type(schema.get('items'))}"
    if isinstance(kind, str):
        return kind
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, list) and options:
            return " or ".join(describe_type(o) for o in options)
    if "$ref" in schema:
        return "object"
    return "any"


def _literal(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def describe_tool(spec: ToolSpec, *, include_category: bool = True) -> str:
    """One tool: heading, description, category and each parameter with type and whether
    it is required."""
    lines = [f"### {spec.name}", spec.description.strip() or "(no description)"]
    if include_category and spec.category:
        lines.append(f"Category: {spec.category}")
    properties = spec.parameters.get("properties")
    required = spec.parameters.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    if isinstance(properties, Mapping) and properties:
        lines.append("Parameters:")
        for name, schema in properties.items():
            flag = ", required" if name in needed else ""
            line = f"  - {name} ({describe_type(schema)}{flag})"
            description = schema.get("description") if isinstance(schema, Mapping) else None
            if isinstance(description, str) and description.strip():
                line += f": {description.strip()}"
            lines.append(line)
    else:
        lines.append("Parameters: none")
    return "\n".join(lines)


def build_tool_descriptions(specs: Sequence[ToolSpec], *, include_category: bool = True) -> str:
    """Every tool described for a system prompt, separated by blank lines."""
    if not specs:
        return "No tools available."
    return "\n\n".join(describe_tool(s, include_category=include_category) for s in specs)
