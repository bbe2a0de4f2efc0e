"""opencode's events and messages, read defensively: every field is checked before use and
anything unexpected is skipped, so a changed or hostile server cannot crash a run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from jarvis.domain.errors import ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunDone, ExternalTextDelta, ExternalToolDone
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Usage
from jarvis.domain.tools.specs import ToolResult, truncate

MAX_EVENT_LINE = 1_048_576
MAX_MESSAGES_BYTES = 32 * 1_048_576
MAX_TOOL_OUTPUT = 20_000


def _obj(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tool_result(part: dict[str, object]) -> ToolResult | None:
    """A finished tool part as a ``ToolResult``; ``None`` while it is pending or running."""
    state = _obj(part.get("state"))
    status = _str(state.get("status"))
    if status not in ("completed", "error"):
        return None
    output = _str(state.get("output")) or _str(state.get("error")) or _str(state.get("title"))
    inputs = state.get("input")
    content, cut = truncate(output, MAX_TOOL_OUTPUT)
    return ToolResult(
        tool_name=_str(part.get("tool")) or "tool",
        content=content,
        truncated=cut,
        success=status == "completed",
        call_id=_str(part.get("callID")) or _str(part.get("id")),
        metadata={"input": json.dumps(inputs)[:MAX_TOOL_OUTPUT]} if inputs is not None else {},
    )


def session_of(event: object) -> str:
    """The session an ``/event`` item belongs to ("" for the server's own events): in
    ``properties.sessionID``, or in the part or the message info it carries."""
    props = _obj(_obj(event).get("properties"))
    return (
        _str(props.get("sessionID"))
        or _str(_obj(props.get("part")).get("sessionID"))
        or _str(_obj(props.get("info")).get("sessionID"))
    )


@dataclass(slots=True)
class RunState:
    """What one run has seen on the event stream of its session."""

    session_id: str
    part_types: dict[str, str] = field(default_factory=dict)
    tools_done: set[str] = field(default_factory=set)
    idle: bool = False
    busy: bool = False
    permission: str | None = None
    replies: dict[str, str] = field(default_factory=dict)
    """The assistant messages the session's events told of: id to parent (the user
    message it answers); a late event of the previous run may be among them."""
    streamed: dict[str, str] = field(default_factory=dict)
    """The text streamed so far (the answer's and its reasoning's), by part."""
    lost: bool = False
    """Some of the run's events may be missing (the event stream ended during the run)."""
    answer: object = None
    """The prompt's own reply: the last assistant message, as the session lists it."""

    def feed(self, event: object) -> list[ExternalTextDelta | ExternalToolDone]:
        """The updates one ``/event`` item brings for this run's session."""
        event = _obj(event)
        kind = _str(event.get("type"))
        props = _obj(event.get("properties"))
        if kind == "message.part.updated":
            part = _obj(props.get("part"))
            if _str(part.get("sessionID")) != self.session_id:
                return []
            part_id, part_type = _str(part.get("id")), _str(part.get("type"))
            self.part_types[part_id] = part_type
            if part_type == "tool" and part_id not in self.tools_done:
                result = tool_result(part)
                if result is not None:
                    self.tools_done.add(part_id)
                    return [ExternalToolDone(result=result)]
            return []
        if kind == "message.updated":
            info = _obj(props.get("info"))
            if _str(info.get("sessionID")) == self.session_id and _str(info.get("role")) == (
                "assistant"
            ):
                self.replies[_str(info.get("id"))] = _str(info.get("parentID"))
            return []
        if _str(props.get("sessionID")) != self.session_id:
            return []
        if kind == "message.part.delta":
            part_id = _str(props.get("partID"))
            part_type = self.part_types.get(part_id, "text")
            delta = _str(props.get("delta"))
            if _str(props.get("field")) == "text" and delta:
                self.streamed[part_id] = self.streamed.get(part_id, "") + delta
                if part_type == "text":
                    return [ExternalTextDelta(text=delta)]
        elif kind == "session.status":
            status = _str(_obj(props.get("status")).get("type"))
            self.busy = self.busy or status == "busy"
            self.idle = self.busy and status == "idle"
        elif kind == "session.idle":
            self.idle = True
        elif kind == "session.error":
            error = _obj(props.get("error"))
            message = _str(_obj(error.get("data")).get("message")) or _str(error.get("name"))
            raise ExternalRuntimeError(
                f"opencode failed: {message or 'unknown error'}"[:1000], runtime="opencode"
            )
        elif kind == "permission.asked":
            self.permission = _str(props.get("id")) or None
        return []


def answered_alone(reply: object, state: RunState) -> bool:
    """Whether the prompt's own reply (the last assistant message) is the whole answer:
    the events, none lost, told of that one assistant message answering the prompt and of
    no other (a tool round makes several, read back from the session)."""
    info = _obj(_obj(reply).get("info"))
    parent = _str(info.get("parentID"))
    ours = {message for message, answers in state.replies.items() if answers == parent}
    return (
        not state.lost and _str(info.get("role")) == "assistant" and ours == {_str(info.get("id"))}
    )


def caught_up(reply: object, state: RunState) -> bool:
    """Whether every update of the answer has been streamed: it is the prompt's reply alone,
    each of its text and reasoning parts was streamed whole (trailing blanks may be
    trimmed from the stored text) and each finished tool part reported, so nothing of it
    is left on the event stream (nothing to wait for, nor to reach the session's next
    run)."""
    if not answered_alone(reply, state):
        return False
    for part in _list(_obj(reply).get("parts")):
        part = _obj(part)
        kind = _str(part.get("type"))
        if kind == "tool" and tool_result(part) is not None:
            if _str(part.get("id")) not in state.tools_done:
                return False
            continue
        if kind not in ("text", "reasoning"):
            continue
        text, streamed = _str(part.get("text")), state.streamed.get(_str(part.get("id")), "")
        if not streamed.startswith(text) or streamed[len(text) :].strip():
            return False
    return True


def final_reply(messages: object, state: RunState) -> ExternalRunDone:
    """The run's answer from the session's messages: the assistant messages after the last
    user message; the last one's text is the content, their tool parts the tool results."""
    items = [_obj(m) for m in messages] if isinstance(messages, list) else []
    start = 0
    for index, item in enumerate(items):
        if _str(_obj(item.get("info")).get("role")) == "user":
            start = index + 1
    replies = [m for m in items[start:] if _str(_obj(m.get("info")).get("role")) == "assistant"]
    if not replies:
        raise ExternalRuntimeError("opencode finished without an answer.", runtime="opencode")
    tools: list[ToolResult] = []
    usage = Usage()
    for reply in replies:
        tokens = _obj(_obj(reply.get("info")).get("tokens"))
        usage = usage + Usage(
            prompt_tokens=_int(tokens.get("input")), completion_tokens=_int(tokens.get("output"))
        )
        for part in _list(reply.get("parts")):
            part = _obj(part)
            if _str(part.get("type")) == "tool" and (result := tool_result(part)) is not None:
                tools.append(result)
    last = replies[-1]
    info = _obj(last.get("info"))
    error = _obj(info.get("error"))
    if error:
        message = _str(_obj(error.get("data")).get("message")) or _str(error.get("name"))
        raise ExternalRuntimeError(
            f"opencode failed: {message or 'unknown error'}"[:1000], runtime="opencode"
        )
    parts = _list(last.get("parts"))
    content = "".join(
        _str(_obj(p).get("text")) for p in parts if _str(_obj(p).get("type")) == "text"
    )
    metadata: JSONObject = {
        "finish": _str(info.get("finish")),
        "provider_id": _str(info.get("providerID")),
    }
    return ExternalRunDone(
        content=content,
        session_id=state.session_id,
        tool_results=tuple(tools),
        turns=len(replies),
        usage=usage,
        metadata=metadata,
    )
