"""The runner's stdout, read defensively: JSON-lines events, then the final JSON between
the output markers. Every field is checked before use, every line and the final block
are bounded, and anything unexpected is skipped, so a changed or broken runner cannot
crash a run; a missing or unreadable final block is a clear :class:`ExternalRuntimeError`.
Each line is looked at once (linear in the output)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunDone, ExternalTextDelta, ExternalToolDone
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Usage
from jarvis.domain.tools.specs import ToolResult, truncate

START = "---OPENJARVIS_OUTPUT_START---"
END = "---OPENJARVIS_OUTPUT_END---"
MAX_LINE = 4 * 1_048_576
"""The longest stdout line read (the final JSON is one line; tool outputs are capped)."""
MAX_FINAL = 16 * 1_048_576
MAX_TOOL_OUTPUT = 20_000
MAX_TEXT = 1_000
RUNTIME = "openhands"


def _obj(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _str(value: object, limit: int = MAX_TOOL_OUTPUT) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def tool_result(item: dict[str, object]) -> ToolResult:
    """One ``tool_result`` event (or final ``tool_results`` item) as a ``ToolResult``."""
    content, cut = truncate(_str(item.get("content"), 10 * MAX_TOOL_OUTPUT), MAX_TOOL_OUTPUT)
    arguments = _str(item.get("input"))
    return ToolResult(
        tool_name=_str(item.get("tool_name"), 200) or "tool",
        content=content,
        truncated=cut,
        success=item.get("success") is True,
        call_id=_str(item.get("call_id"), 200),
        metadata={"input": arguments} if arguments else {},
    )


@dataclass(slots=True)
class RunnerOutput:
    """What one run's stdout has said so far; :meth:`feed` it line by line."""

    session_id: str = ""
    final_lines: list[str] = field(default_factory=list)
    in_final: bool = False
    final_seen: bool = False
    final_size: int = 0
    overflow: bool = False

    def feed(self, line: str) -> list[ExternalTextDelta | ExternalToolDone]:
        """The events one line brings (none for the final block, noise or a bad line)."""
        line = line.rstrip("\r\n")
        if self.in_final:
            if line == END:
                self.in_final, self.final_seen = False, True
            elif self.final_size + len(line) > MAX_FINAL:
                self.overflow = True
            else:
                self.final_size += len(line)
                self.final_lines.append(line)
            return []
        if line == START:
            self.in_final, self.final_lines, self.final_size = True, [], 0
            return []
        if not line.startswith("{") or len(line) > MAX_LINE:
            return []  # a library's stray output; the runner's events are JSON objects
        try:
            event = _obj(json.loads(line))
        except ValueError:
            return []
        kind = event.get("type")
        if kind == "text_delta" and (text := _str(event.get("text"), MAX_LINE)):
            return [ExternalTextDelta(text=text)]
        if kind == "tool_result":
            return [ExternalToolDone(result=tool_result(event))]
        if kind == "session" and (session := _str(event.get("session_id"), 64)):
            self.session_id = session
        return []

    def result(self, *, session_id: str, hint: str = "") -> ExternalRunDone:
        """The run's result from the final block; an error when there is none, when it is
        unreadable, or when the runner reports one."""
        if self.overflow:
            raise ExternalRuntimeError(
                "openhands' result is too large to read.", runtime=RUNTIME, hint=hint
            )
        if not self.final_seen:
            raise ExternalRuntimeError(
                "openhands ended without a result.", runtime=RUNTIME, hint=hint
            )
        try:
            final = json.loads("\n".join(self.final_lines))
        except ValueError:
            final = None
        if not isinstance(final, dict):
            raise ExternalRuntimeError(
                "openhands' result is not readable.", runtime=RUNTIME, hint=hint
            )
        if final.get("is_error") is not False:
            error = _str(final.get("error"), MAX_TEXT) or "unknown error"
            raise ExternalRuntimeError(f"openhands failed: {error}", runtime=RUNTIME, hint=hint)
        raw_tools = final.get("tool_results")
        tools = (
            tuple(tool_result(_obj(t)) for t in raw_tools) if isinstance(raw_tools, list) else ()
        )
        usage = _obj(final.get("usage"))
        metadata: JSONObject = {"status": _str(final.get("status"), 40)}
        return ExternalRunDone(
            content=_str(final.get("content"), MAX_FINAL),
            session_id=_str(final.get("session_id"), 64) or self.session_id or session_id,
            tool_results=tools,
            turns=max(1, _int(final.get("turns"))),
            usage=Usage(
                prompt_tokens=_int(usage.get("prompt_tokens")),
                completion_tokens=_int(usage.get("completion_tokens")),
            ),
            metadata=metadata,
        )
