"""What a session store keeps: messages with everything needed to replay them exactly.

A stored :class:`SessionMessage` is the :class:`~jarvis.domain.llm.messages.Message` itself
(role, content, the assistant's tool calls with their ids, a tool result with its call id)
plus what the conversation's owner wants to see later: the model that wrote it, the usage it
cost, and when. Every store writes the one canonical record of :func:`message_to_record`,
so a session moved from one backend to another replays the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message, Role, ToolCall

#: The largest encoded message a store accepts (a model's answer is far smaller; a bound
#: keeps one runaway tool result from making every later load slow).
MAX_RECORD_BYTES = 8 * 1024 * 1024

#: How much of the first user message names a session in listings.
TITLE_CHARS = 80


def utc_now() -> datetime:
    """Now, in UTC, to the microsecond (what stores keep)."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMessage:
    """One stored message: the message, who wrote it with what usage, and when."""

    message: Message
    model: str = ""
    usage: Usage | None = None
    created_at: datetime = field(default_factory=utc_now)


class SessionInfo(NamedTuple):
    """A session as listed: no messages, only what a listing needs.

    A named tuple with the times as integer microseconds since the epoch (UTC), because
    listing ten thousand sessions must stay fast; :attr:`created_at` and
    :attr:`updated_at` give them as datetimes.
    """

    id: str
    message_count: int
    created_us: int
    updated_us: int
    title: str = ""

    @property
    def created_at(self) -> datetime:
        return stored_time(self.created_us)

    @property
    def updated_at(self) -> datetime:
        return stored_time(self.updated_us)

    def as_json(self) -> JSONObject:
        """The session as every listing shows it in JSON (``jarvis sessions list --json``,
        the MCP server's ``sessions_list``): times as ISO 8601."""
        return {
            "id": self.id,
            "message_count": self.message_count,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "title": self.title,
        }


# --- errors -------------------------------------------------------------------------------


PAGE_SIZE = 500
"""How many messages :meth:`SessionStorePort.iter_records` reads from a store at a time."""


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A run of consecutive messages of a session (:meth:`SessionStorePort.load_page`).

    ``start`` is the position of the first of ``records`` in the session (0 for its first
    message; 0 when the page is empty). A session is only ever appended to, so positions
    never change: a reader going backwards asks for ``before=start`` next, and neither
    repeats nor skips a message however much is appended meanwhile."""

    start: int
    records: tuple[SessionMessage, ...]


def check_page_bounds(limit: int, before: int | None) -> None:
    """Refuse a page of fewer than one message, or a negative ``before``
    (a ``ConfigurationError``)."""
    if limit < 1:
        raise ConfigurationError(f"limit must be >= 1, got {limit}.")
    if before is not None and before < 0:
        raise ConfigurationError(f"before must be >= 0, got {before}.")


def page_of(records: Sequence[SessionMessage], *, limit: int, before: int | None) -> SessionPage:
    """The page of a session held whole in memory (``records``: all of it, oldest first)."""
    end = len(records) if before is None else min(before, len(records))
    start = max(0, end - limit)
    page = tuple(records[start:end])
    return SessionPage(start=start if page else 0, records=page)


def check_page_size(page_size: int) -> int:
    """``page_size`` when it is at least 1 (a ``ConfigurationError`` otherwise)."""
    if page_size < 1:
        raise ConfigurationError(f"page_size must be >= 1, got {page_size}.")
    return page_size


class SessionStoreError(JarvisError):
    """The session store could not do what was asked; nothing stored was changed.

    ``location`` names the store (a file path, or a database URL with its password
    replaced by ``***``) so the message says where to look.
    """

    def __init__(self, message: str, *, location: str = "", hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.location = location


class SessionStoreUnavailableError(SessionStoreError):
    """The store cannot be reached or opened now (server down, permissions); retryable."""

    retryable = True


class SessionStoreLockedError(SessionStoreUnavailableError):
    """Another process held the store longer than the busy timeout."""


class SessionStoreCorruptError(SessionStoreError):
    """The stored data is damaged or not a jarvis session store; it was left untouched."""


# --- the canonical record -----------------------------------------------------------------


def title_of(records: tuple[SessionMessage, ...] | list[SessionMessage]) -> str:
    """The first user message, on one line and shortened: how listings name a session."""
    for record in records:
        if record.message.role is Role.USER and record.message.content.strip():
            words = record.message.content.split()
            text = "".join(c for c in " ".join(words) if c.isprintable())
            return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"
    return ""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """``moment`` as integer microseconds since the epoch (exact, sortable); naive is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_micros(micros: int) -> datetime:
    """The inverse of :func:`to_micros`, in UTC."""
    return _EPOCH + timedelta(microseconds=micros)


def stored_time(micros: int, *, local: bool = False) -> datetime:
    """A time read from a store, in UTC (or the local zone): one that no ``datetime`` can
    hold is a damaged store (:class:`SessionStoreCorruptError`), not a crash."""
    try:
        moment = from_micros(micros)
        return moment.astimezone() if local else moment
    except (OverflowError, ValueError, OSError) as exc:
        raise SessionStoreCorruptError(
            f"A stored time ({micros} microseconds since 1970) is out of range: "
            "the session store is damaged."
        ) from exc


def message_to_record(record: SessionMessage) -> JSONObject:
    """The JSON object every store writes for ``record``."""
    message = record.message
    out: JSONObject = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        calls: list[JSONValue] = []
        for call in message.tool_calls:
            entry: JSONObject = {"id": call.id, "name": call.name, "arguments": call.arguments}
            if call.raw_arguments is not None:
                entry["raw_arguments"] = call.raw_arguments
            calls.append(entry)
        out["tool_calls"] = calls
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if record.model:
        out["model"] = record.model
    if record.usage is not None:
        out["usage"] = {
            "prompt_tokens": record.usage.prompt_tokens,
            "completion_tokens": record.usage.completion_tokens,
        }
    out["at"] = to_micros(record.created_at)
    return out


def encode_record(record: SessionMessage) -> str:
    """:func:`message_to_record` as compact JSON text; refuses a record over the size bound.

    Text that holds a lone surrogate (an engine can send one) is written with ASCII escapes
    (``\\ud800``): the same JSON value, which every store can encode as UTF-8."""
    data = message_to_record(record)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    if len(text) > MAX_RECORD_BYTES // 4 and len(text.encode("utf-8")) > MAX_RECORD_BYTES:
        raise SessionStoreError(
            f"A {record.message.role.value} message of {len(text.encode('utf-8'))} bytes is "
            f"too large to store (at most {MAX_RECORD_BYTES}).",
            hint="Shorten the tool result or message before saving it.",
        )
    return text


def _str_or_none(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an integer")
    return value


def message_from_record(data: object) -> SessionMessage:
    """Rebuild a stored message; raises ``ValueError`` when ``data`` is not a valid record."""
    try:
        if not isinstance(data, dict):
            raise TypeError("a record is a JSON object")
        calls: list[ToolCall] = []
        for raw in data.get("tool_calls") or ():
            if not isinstance(raw, dict):
                raise TypeError("a tool call is a JSON object")
            arguments = raw.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise TypeError("tool call arguments are a JSON object")
            calls.append(
                ToolCall(
                    id=str(raw["id"]),
                    name=str(raw["name"]),
                    arguments=arguments,
                    raw_arguments=_str_or_none(raw.get("raw_arguments")),
                )
            )
        content = data.get("content", "")
        if not isinstance(content, str):
            raise TypeError("content is a string")
        usage_data = data.get("usage")
        usage = None
        if usage_data is not None:
            if not isinstance(usage_data, dict):
                raise TypeError("usage is a JSON object")
            usage = Usage(
                prompt_tokens=_int(usage_data.get("prompt_tokens", 0)),
                completion_tokens=_int(usage_data.get("completion_tokens", 0)),
            )
        model = data.get("model", "")
        if not isinstance(model, str):
            raise TypeError("model is a string")
        return SessionMessage(
            message=Message(
                role=Role(data["role"]),
                content=content,
                tool_calls=tuple(calls),
                tool_call_id=_str_or_none(data.get("tool_call_id")),
                name=_str_or_none(data.get("name")),
            ),
            model=model,
            usage=usage,
            created_at=from_micros(_int(data.get("at", 0))),
        )
    except (KeyError, TypeError, OverflowError) as exc:
        raise ValueError(f"not a stored message: {exc}") from exc


def decode_record(text: str | bytes) -> SessionMessage:
    """Parse the text :func:`encode_record` wrote; ``ValueError`` when it is not one."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise ValueError("not a stored message: nested too deeply") from exc
    return message_from_record(data)
