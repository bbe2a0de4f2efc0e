"""Reading labelled action text (ReAct's Thought / Action / Action Input / Final Answer, and
the structured THOUGHT / TOOL / ARGUMENTS / FINAL_ANSWER format) and JSON envelopes.

The rules, each one a way a model's reply is misread otherwise:

* labels count only at the start of a line (after optional markdown such as ``**`` or
  ``>``), case-insensitively, so "Transaction: 5" is not an action;
* an Action that comes before a Final Answer wins (the model wrote a step, then imagined its
  outcome); a Final Answer that comes first ends the run;
* the Action Input is read as one JSON value from where it starts, however many lines or
  blank lines it spans, inside a code fence or not; whatever follows it — typically a
  hallucinated "Observation:" — is discarded;
* a reply that is a JSON envelope (``{"action": ..., "action_input": ...}``,
  ``{"tool": ..., "arguments": ...}``, ``{"final_answer": ...}``), bare or fenced, is read
  as such;
* plain text with no label at all is the final answer; text that uses the labels but has
  neither an action nor a final answer, or an action without a readable tool name, is a
  parse error the agent feeds back to the model.

The parser never raises, whatever the text, and runs in time linear in its length: every
pattern below is anchored and possessive (``*+``), so no input can make it backtrack (a run
of ``_`` at a line start once took seconds per character), and only the first
:data:`MAX_REPLY_CHARS` characters of a reply are read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TypeAlias

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.protocols.reply_text import strip_think


@dataclass(frozen=True, slots=True)
class ActionLabels:
    """Regular-expression alternatives for each label of a labelled action format."""

    thought: str
    action: str
    action_input: str
    final_answer: str
    observation: str


REACT_LABELS = ActionLabels(
    thought=r"thought",
    action=r"action",
    action_input=r"action[ \t_-]*input",
    final_answer=r"final[ \t_-]*answer",
    observation=r"observation",
)
STRUCTURED_LABELS = ActionLabels(
    thought=r"thought",
    action=r"tool",
    action_input=r"arguments|tool[ \t_-]*input|input",
    final_answer=r"final[ \t_-]*answer",
    observation=r"observation",
)


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """A tool call. ``arguments`` is ``None`` when the input was not a JSON object;
    ``raw_input`` keeps the input as written. ``end`` is where the action ends in the
    (think-stripped) ``text``; anything after it is discarded."""

    tool: str
    arguments: JSONObject | None
    raw_input: str
    thought: str
    text: str
    end: int


@dataclass(frozen=True, slots=True)
class ParsedFinal:
    answer: str
    thought: str = ""


@dataclass(frozen=True, slots=True)
class ParsedError:
    error: str


ParsedReply: TypeAlias = ParsedAction | ParsedFinal | ParsedError

MAX_REPLY_CHARS = 1_000_000
"""How much of one reply the parser reads (far more than any ``max_tokens`` yields): a
bound on the work, whatever an engine sends."""

_FINAL_NAMES = frozenset({"final answer", "final_answer", "finalanswer", "finish", "final"})
_NAME_TOKEN = re.compile(r"[A-Za-z0-9_][\w.\-]*")
_FENCE_OPEN = re.compile(r"[ \t]*+```[\w+-]*+[ \t]*+\n?")
_FENCED_BLOCK = re.compile(r"```[\w+-]*+[ \t]*+\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()

_ACTION_KEYS = ("action", "tool", "tool_name", "function")
_INPUT_KEYS = ("action_input", "arguments", "args", "tool_input", "parameters", "input")
_FINAL_KEYS = ("final_answer", "answer")


def _marker_pattern(labels: ActionLabels) -> re.Pattern[str]:
    """One line-anchored label. The markdown before it (``**``, ``> ``, ``## ``...) is one
    possessive class, and each run after it too: a nested ``(?:[*_#>]+[ \t]*)*`` here was
    exponential in a run of those characters."""
    alternatives = (
        f"(?P<final>{labels.final_answer})",
        f"(?P<input>{labels.action_input})",
        f"(?P<action>{labels.action})",
        f"(?P<thought>{labels.thought})",
        f"(?P<observation>{labels.observation})",
    )
    return re.compile(
        r"^[ \t*_#>]*+(?:" + "|".join(alternatives) + r")(?:[ \t]*+\d++)?+"
        r"[ \t]*+[*_]*+[ \t]*+:[*_]*+[ \t]*+",
        re.IGNORECASE | re.MULTILINE,
    )


_PATTERNS: dict[ActionLabels, re.Pattern[str]] = {}


def _pattern_for(labels: ActionLabels) -> re.Pattern[str]:
    pattern = _PATTERNS.get(labels)
    if pattern is None:
        pattern = _PATTERNS[labels] = _marker_pattern(labels)
    return pattern


@dataclass(frozen=True, slots=True)
class _Marker:
    kind: str
    start: int
    end: int


def _markers(text: str, labels: ActionLabels) -> list[_Marker]:
    found = []
    for match in _pattern_for(labels).finditer(text):
        kind = match.lastgroup or ""
        found.append(_Marker(kind, match.start(), match.end()))
    return found


def find_labels(text: str, labels: ActionLabels = REACT_LABELS) -> list[tuple[str, int, int]]:
    """Every line-anchored label in ``text`` as ``(kind, start, end)``; ``kind`` is one of
    ``final``, ``input``, ``action``, ``thought``, ``observation`` (in the first
    :data:`MAX_REPLY_CHARS` characters)."""
    return [(m.kind, m.start, m.end) for m in _markers(text[:MAX_REPLY_CHARS], labels)]


def parse_reply(text: str, labels: ActionLabels = REACT_LABELS) -> ParsedReply:
    """Read one model reply. See the module docstring for the rules."""
    try:
        return _parse(strip_think(text[:MAX_REPLY_CHARS]), labels)
    except RecursionError:
        return ParsedError("the reply is nested too deeply to read")


def _parse(text: str, labels: ActionLabels) -> ParsedReply:
    stripped = text.strip()
    if not stripped:
        return ParsedError("the reply was empty")
    if stripped.startswith(("{", "```")):
        envelope = _find_envelope(stripped)
        if envelope is not None:
            return envelope
    markers = _markers(text, labels)
    action = next((m for m in markers if m.kind == "action"), None)
    final = next((m for m in markers if m.kind == "final"), None)
    if action is not None and (final is None or action.start < final.start):
        return _read_action(text, markers, action)
    if final is not None:
        answer = text[final.end :].strip()
        if not answer:
            return ParsedError("the final answer after 'Final Answer:' is empty")
        return ParsedFinal(answer=answer, thought=_thought(text, markers))
    envelope = _find_envelope(stripped)
    if envelope is not None:
        return envelope
    if markers:
        return ParsedError("the reply has neither an 'Action:' line nor a 'Final Answer:' line")
    return ParsedFinal(answer=stripped)


def _thought(text: str, markers: list[_Marker]) -> str:
    for index, marker in enumerate(markers):
        if marker.kind == "thought":
            end = markers[index + 1].start if index + 1 < len(markers) else len(text)
            return text[marker.end : end].strip()
    return ""


def _read_action(text: str, markers: list[_Marker], action: _Marker) -> ParsedReply:
    line_end = text.find("\n", action.end)
    line_end = len(text) if line_end < 0 else line_end
    name_line = text[action.end : line_end]
    cleaned = name_line.strip().strip("`*'\"").strip()
    if cleaned.lower().rstrip(":").strip() in _FINAL_NAMES:
        return _final_via_action(text, markers, action, line_end)
    token = _NAME_TOKEN.match(cleaned)
    if token is None:
        return ParsedError("the 'Action:' line has no tool name")
    name = token.group(0)
    thought = _thought(text, markers)

    following = [m for m in markers if m.start > action.start]
    next_marker = following[0] if following else None
    if next_marker is not None and next_marker.kind == "input":
        start = next_marker.end
        limit = following[1].start if len(following) > 1 else len(text)
    else:
        inline = cleaned[token.end() :].lstrip(" \t(")
        offset = name_line.find(inline) if inline.startswith(("{", "[")) else -1
        start = action.end + offset if offset >= 0 else line_end
        limit = next_marker.start if next_marker is not None else len(text)
    arguments, raw, end = _read_input(text, start, limit)
    return ParsedAction(
        tool=name, arguments=arguments, raw_input=raw, thought=thought, text=text, end=end
    )


def _final_via_action(
    text: str, markers: list[_Marker], action: _Marker, line_end: int
) -> ParsedReply:
    """``Action: Final Answer`` with the answer as its input (a common convention)."""
    following = [m for m in markers if m.start > action.start]
    start = following[0].end if following and following[0].kind == "input" else line_end
    value, raw, _ = _read_input(text, start, len(text))
    answer = raw
    if value is not None:
        found = _first_string(value, _FINAL_KEYS)
        answer = found if found is not None else raw
    else:
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, str):
            answer = decoded
    answer = answer.strip()
    if not answer:
        return ParsedError("'Action: Final Answer' needs the answer as its input")
    return ParsedFinal(answer=answer, thought=_thought(text, markers))


def _read_input(text: str, start: int, limit: int) -> tuple[JSONObject | None, str, int]:
    """The action input beginning at ``start``: parsed object (or None), raw text, end."""
    index = start
    while index < limit and text[index] in " \t\r\n":
        index += 1
    fence = _FENCE_OPEN.match(text, index)
    fenced = fence is not None and text.startswith("```", index)
    if fenced and fence is not None:
        index = fence.end()
        while index < limit and text[index] in " \t\r\n":
            index += 1
    if index < min(limit, len(text)) and text[index] in '{["':
        try:
            value, end = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):
            end = _balanced_end(text, index)
            raw = text[index:end].strip() if end > index else _plain(text, index, limit)
            return None, raw, max(end, index + len(raw))
        raw = text[index:end]
        if fenced:
            close = text.find("```", end)
            if close >= 0 and not text[end:close].strip():
                end = close + 3
        if isinstance(value, dict):
            return value, raw, end
        if isinstance(value, str):
            decoded = _object_from_string(value)
            if decoded is not None:
                return decoded, raw, end
        return None, raw, end
    raw = _plain(text, index, limit)
    if not raw:
        return {}, "", index
    return None, raw, index + len(raw)


def _plain(text: str, index: int, limit: int) -> str:
    """Non-JSON input: up to the next label, without code fences."""
    chunk = text[index:limit].strip()
    if chunk.startswith("```"):
        block = _FENCED_BLOCK.search(chunk)
        if block is not None:
            return block.group(1).strip()
        chunk = chunk[3:]
    if chunk.endswith("```"):
        chunk = chunk[:-3]
    return chunk.strip()


def _balanced_end(text: str, index: int) -> int:
    """Where a brace-delimited value starting at ``index`` closes (``index`` when it does
    not), honouring strings and escapes."""
    depth = 0
    in_string = False
    escaped = False
    for position in range(index, len(text)):
        char = text[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position + 1
    return index


def _object_from_string(value: str) -> JSONObject | None:
    """Arguments double-encoded as a JSON string holding an object."""
    stripped = value.strip()
    if not stripped.startswith("{"):
        return None
    try:
        decoded = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


# --- JSON envelopes ---------------------------------------------------------------------


def _find_envelope(text: str) -> ParsedReply | None:
    """A JSON object with action or final-answer keys: the whole reply, or a fenced block,
    or the first object in the text."""
    candidates: list[str] = []
    block = _FENCED_BLOCK.search(text)
    if block is not None:
        candidates.append(block.group(1))
    brace = text.find("{")
    if brace >= 0:
        candidates.append(text[brace:])
    for candidate in candidates:
        start = candidate.find("{")
        if start < 0:
            continue
        try:
            value, _ = _DECODER.raw_decode(candidate, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            parsed = _from_envelope(value)
            if parsed is not None:
                return parsed
    return None


def _normalized(obj: JSONObject) -> dict[str, JSONValue]:
    return {re.sub(r"[\s\-]+", "_", k.strip().lower()): v for k, v in obj.items()}


def _from_envelope(obj: JSONObject) -> ParsedReply | None:
    keys = _normalized(obj)
    nested = keys.get("function")
    if isinstance(nested, dict) and "name" in nested:
        return _from_envelope(nested)
    thought_value = keys.get("thought")
    thought = thought_value if isinstance(thought_value, str) else ""
    name = _first_string(keys, _ACTION_KEYS)
    has_input = any(k in keys for k in _INPUT_KEYS)
    if name is None and has_input:
        name = _first_string(keys, ("name",))
    if name is not None and name.strip() and name.strip().lower() not in {"none", "null"}:
        raw_value = next((keys[k] for k in _INPUT_KEYS if k in keys), None)
        if name.strip().lower() in _FINAL_NAMES:
            answer = raw_value if isinstance(raw_value, str) else _first_string(keys, _FINAL_KEYS)
            if answer is not None and answer.strip():
                return ParsedFinal(answer=answer.strip(), thought=thought)
            return ParsedError("'final_answer' needs the answer as its input")
        arguments, raw = _envelope_arguments(raw_value)
        text = json.dumps(obj, ensure_ascii=False)
        return ParsedAction(
            tool=name.strip(),
            arguments=arguments,
            raw_input=raw,
            thought=thought,
            text=text,
            end=len(text),
        )
    for key in _FINAL_KEYS:
        if key in keys:
            value = keys[key]
            answer = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if value is None or not answer.strip():
                return ParsedError(f"'{key}' is empty")
            return ParsedFinal(answer=answer.strip(), thought=thought)
    return None


def _envelope_arguments(value: JSONValue | None) -> tuple[JSONObject | None, str]:
    if value is None:
        return {}, ""
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        decoded = _object_from_string(value)
        return (decoded, value) if decoded is not None else (None, value)
    return None, json.dumps(value, ensure_ascii=False)


def _first_string(obj: JSONObject | JSONValue, keys: tuple[str, ...]) -> str | None:
    if not isinstance(obj, dict):
        return None
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str):
            return value
    return None


# --- rendering (few-shot examples, round-trip tests) -------------------------------------


def render_action(tool: str, arguments: JSONObject, thought: str = "") -> str:
    """A ReAct step as the parser reads it."""
    lines = [f"Thought: {thought}"] if thought else []
    lines.append(f"Action: {tool}")
    lines.append("Action Input: " + json.dumps(arguments, ensure_ascii=False))
    return "\n".join(lines)


def render_final(answer: str, thought: str = "") -> str:
    """A ReAct final answer as the parser reads it."""
    lines = [f"Thought: {thought}"] if thought else []
    lines.append(f"Final Answer: {answer}")
    return "\n".join(lines)
