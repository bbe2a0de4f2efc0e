"""The runner's protocol, typed: one request on stdin, JSON-line events, one final block.

``claude_code_runner/runner.mjs`` reads a :class:`RunnerRequest` as one JSON object on
stdin, writes :data:`RunnerEvent` lines while the SDK runs (the session, text deltas, tool
uses and their results), then the line :data:`START`, one :class:`RunnerResponse` line and
:data:`END`. Exit 0: done; 1: a runtime error (the block is still printed, ``is_error``
true); 2: bad input. The JSON Schemas in ``contracts/schemas/claude_code_runner/`` are
generated from these models (``scripts/export_schemas.py``) and drift-checked.

:class:`OutputReader` parses the runner's stdout in one pass: every line is bounded (an
overlong line is dropped whole, never half-parsed), the whole output is bounded, and a
malformed line is skipped, never fatal: only a missing or malformed final block is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

START = "---OPENJARVIS_OUTPUT_START---"
END = "---OPENJARVIS_OUTPUT_END---"
MAX_LINE = 4 * 1024 * 1024
"""The longest stdout line read (a tool's input or result: a whole file written or read)."""
MAX_OUTPUT = 64 * 1024 * 1024
"""The most stdout one run may write before it is stopped."""

PermissionMode: TypeAlias = Literal[
    "default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"
]
PERMISSION_MODES: tuple[PermissionMode, ...] = (
    "default",
    "acceptEdits",
    "bypassPermissions",
    "plan",
    "dontAsk",
)


class RunnerMcpServer(BaseModel):
    """An MCP server over stdio the SDK starts for the run (Claude Code's ``mcpServers``)."""

    model_config = ConfigDict(extra="forbid", title="claude_code runner MCP server")

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables added to the server's environment."
    )


class RunnerRequest(BaseModel):
    """What the runner is asked to do (every field is sent)."""

    model_config = ConfigDict(extra="forbid", title="claude_code runner request")

    prompt: str
    api_key: str
    base_url: str = Field(description='The Anthropic-compatible endpoint; "" means the cloud.')
    workspace: str = Field(description="Absolute directory the SDK works in (its cwd).")
    allowed_tools: list[str] = Field(description="The tools the run may use; [] the SDK's own.")
    system_prompt: str
    session_id: str = Field(
        pattern=r"^[A-Za-z0-9-]{0,128}$", description='The session to resume; "" starts a new one.'
    )
    model: str
    max_turns: int = Field(ge=1, le=10_000)
    permission_mode: PermissionMode
    config_dir: str = Field(description="Absolute; the SDK's CLAUDE_CONFIG_DIR and HOME.")
    mcp_servers: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")], RunnerMcpServer] = (
        Field(
            description="MCP servers (stdio) whose tools the run may use, as mcp__NAME__TOOL; "
            "{} none."
        )
    )


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SessionEvent(_Event):
    type: Literal["session"]
    session_id: str


class TextDeltaEvent(_Event):
    type: Literal["text_delta"]
    text: str


class ToolUseEvent(_Event):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, JsonValue]


class ToolResultEvent(_Event):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: bool


RunnerEvent: TypeAlias = Annotated[
    SessionEvent | TextDeltaEvent | ToolUseEvent | ToolResultEvent, Field(discriminator="type")
]
EVENTS: TypeAdapter[RunnerEvent] = TypeAdapter(RunnerEvent)


class RunnerUsage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class RunnerToolResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tool_name: str
    tool_use_id: str
    input: dict[str, JsonValue]
    content: str
    is_error: bool


class RunnerResponse(BaseModel):
    """The final block: the answer, the session, every tool call, the tokens."""

    model_config = ConfigDict(extra="ignore", title="claude_code runner response")

    content: str
    session_id: str
    num_turns: int = Field(ge=0)
    usage: RunnerUsage
    tool_results: list[RunnerToolResult]
    is_error: bool
    subtype: str = Field(description='"success", "error_input", "error_runtime" or the SDK\'s.')
    error: str = Field(description='Why the run failed ("" when it did not).')


def _schema(title: str, body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **body}


def schemas() -> dict[str, dict[str, JsonValue]]:
    """Each message's JSON Schema, by file name under ``contracts/schemas/claude_code_runner/``."""
    return {
        "request.schema.json": _schema(
            "claude_code runner: the request (one JSON object on stdin)",
            RunnerRequest.model_json_schema(),
        ),
        "event.schema.json": _schema(
            "claude_code runner: one event (a JSON line on stdout before the final block)",
            EVENTS.json_schema(),
        ),
        "response.schema.json": _schema(
            "claude_code runner: the final block (the JSON line between the markers)",
            RunnerResponse.model_json_schema(),
        ),
    }


class LineSplitter:
    """Bytes in, whole lines out, none longer than ``max_line`` (the rest of an overlong
    line is discarded up to its newline). Linear in the input."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False
        self.dropped = 0
        """Overlong lines dropped so far."""

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            self._take(chunk[start:newline])
            if not self._skipping:
                lines.append(bytes(self._buffer))
            self._buffer.clear()
            self._skipping = False
            start = newline + 1
        self._take(chunk[start:])
        return lines

    def _take(self, piece: bytes) -> None:
        if self._skipping:
            return
        if len(self._buffer) + len(piece) > self.max_line:
            self._buffer.clear()
            self._skipping = True
            self.dropped += 1
            return
        self._buffer += piece

    def finish(self) -> list[bytes]:
        """The last line, when the output did not end with a newline."""
        rest = b"" if self._skipping else bytes(self._buffer)
        self._buffer.clear()
        self._skipping = False
        return [rest] if rest else []


@dataclass(slots=True)
class OutputReader:
    """The runner's stdout, line by line: events until :data:`START`, then the block."""

    events: int = 0
    malformed: int = 0
    response: RunnerResponse | None = None
    block_error: str = ""
    """Why the final block could not be read (``""``: read, or not reached)."""
    _state: Literal["events", "block", "after"] = "events"
    _block: list[bytes] = field(default_factory=list)

    def feed(self, line: bytes) -> RunnerEvent | None:
        """The event ``line`` carries, if any (``None`` for markers, the block, noise)."""
        text = line.strip()
        if self._state == "events":
            if text == START.encode():
                self._state = "block"
                return None
            if not text.startswith(b"{"):
                return None  # the SDK or node printing something of its own
            try:
                event = EVENTS.validate_json(text)
            except ValidationError:
                self.malformed += 1
                return None
            self.events += 1
            return event
        if self._state == "block":
            if text == END.encode():
                self._state = "after"
                self._parse_block()
            elif text:
                self._block.append(text)
        return None

    def _parse_block(self) -> None:
        if len(self._block) != 1:
            self.block_error = f"the final block has {len(self._block)} lines, not 1"
            return
        try:
            self.response = RunnerResponse.model_validate_json(self._block[0])
        except ValidationError as exc:
            self.block_error = f"the final block is malformed ({exc.error_count()} errors)"

    @property
    def ended(self) -> bool:
        return self._state == "after"
