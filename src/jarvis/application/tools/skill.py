"""The ``skill`` tool: the model reads a skill's instructions, or one of its files.

The catalogue in the system prompt lists the skills by name and description; this tool
returns what a skill says when the model decides to follow it. Reading is confined to the
skill's own folder by the library behind it.
"""

from __future__ import annotations

import asyncio
from typing import Final

from jarvis.application.skills import SkillError, SkillLibrary
from jarvis.domain.json_types import JSONObject
from jarvis.domain.tools.specs import ToolResult, ToolSpec

SKILL_SPEC: Final = ToolSpec(
    name="skill",
    description=(
        "Read a skill from the 'Available Skills' list: its instructions (and the list of "
        "its other files), or with 'file' one of those files (a path relative to the "
        "skill's folder)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, e.g. 'pdf'."},
            "file": {
                "type": "string",
                "description": "A file of the skill, e.g. 'reference.md' (optional).",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    category="knowledge",
    timeout_seconds=10.0,
)


class SkillTool:
    """``skill(name)`` / ``skill(name, file)`` over a :class:`SkillLibrary`."""

    def __init__(self, library: SkillLibrary) -> None:
        self.library = library

    @property
    def spec(self) -> ToolSpec:
        return SKILL_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        name = arguments.get("name")
        file = arguments.get("file")
        if not isinstance(name, str) or not name.strip():
            return ToolResult(
                tool_name="skill", content="Error: 'name' must be a skill name.", success=False
            )
        if file is not None and not isinstance(file, str):
            return ToolResult(
                tool_name="skill", content="Error: 'file' must be a string.", success=False
            )
        try:
            text = await asyncio.to_thread(self.library.read, name.strip(), file or None)
        except SkillError as error:
            return ToolResult(tool_name="skill", content=f"Error: {error}", success=False)
        return ToolResult(tool_name="skill", content=text)
