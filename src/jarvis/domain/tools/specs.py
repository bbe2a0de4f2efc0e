"""Tool descriptions and the outcome of running one."""

from __future__ import annotations

from dataclasses import dataclass, field

from jarvis.domain.json_types import JSONObject


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about a tool, and how the executor must treat it.

    ``parameters`` is a JSON Schema of type ``object``; the executor validates arguments
    against it before the tool runs. ``side_effects`` marks tools that change something
    outside the run (files, memory), so policies can treat them with more care.

    ``blocking`` (the default) says the tool may take a while: it waits on I/O or computes
    for long. The executor runs such a tool as a task of its own that it stops waiting for
    after ``timeout_seconds`` (and a tool made from a sync function runs in a worker
    thread). A tool that always finishes at once — a small in-process computation that
    never waits, like the calculator — declares ``blocking=False`` and is simply awaited,
    which saves a task (and a thread hop) per call; it gets no timeout, so never declare
    it for anything that could hang.

    ``read_only_hint`` and ``destructive_hint`` are what a tool's author claims (an MCP
    server's tool annotations; ``None``: not said): shown to people and policies, never a
    security boundary (a server that claims read-only is run unasked only under the
    built-in approval defaults, which a rule overrides).
    """

    name: str
    description: str
    parameters: JSONObject = field(default_factory=lambda: {"type": "object", "properties": {}})
    category: str = ""
    timeout_seconds: float = 30.0
    side_effects: bool = False
    blocking: bool = True
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    qualified_name: str = ""
    """The name jarvis gives the tool where ``name`` (what the model sees) may differ: an
    MCP server's tool is ``SERVER.TOOL`` (``jarvis mcp call``, ``[tools.approval.tools]``)."""

    @property
    def read_only(self) -> bool:
        """Whether running the tool changes nothing outside the run (what approval
        policies let run without asking): no ``side_effects`` and not marked destructive."""
        return not self.side_effects and self.destructive_hint is not True

    @property
    def destructive(self) -> bool:
        """Whether the tool's author (an MCP server's annotation, a plug-in) marks it
        destructive: it may delete or overwrite."""
        return self.destructive_hint is True


TRUNCATION_MARKER = "\n…[output truncated: {shown} of {total} characters shown]"
"""What replaces the end of a text cut to its limit: the model sees that, and how much, is
missing."""


def openai_function(spec: ToolSpec) -> JSONObject:
    """``spec`` in the function-calling format OpenAI defined, which OpenAI-compatible
    servers, Ollama and OpenJarvis's tools (``to_openai_function``) all take."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with a visible marker, and whether it was cut
    (``limit`` 0 or less: no limit). The one rule for every output a model is shown."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARKER.format(shown=limit, total=len(text)), True


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of one tool call. Failures are results too: they go back to the model."""

    tool_name: str
    content: str
    success: bool = True
    call_id: str = ""
    latency_seconds: float = 0.0
    truncated: bool = False
    metadata: JSONObject = field(default_factory=dict)
