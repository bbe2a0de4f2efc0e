"""``JsonlSessionStore``: one append-only JSON-lines file per session.

Appends are serialised by a per-session file lock and written with one ``write`` call plus
``fsync``, so concurrent writers (a server and a scheduled operative) never interleave
half lines. A torn last line (a crash mid-write) is skipped on load, never fatal.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.messages import Message, Role, ToolCall
from jarvis.domain.session_ids import check_session_id


def _encode(message: Message) -> str:
    record: JSONObject = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        calls: list[JSONValue] = []
        for call in message.tool_calls:
            entry: JSONObject = {"id": call.id, "name": call.name, "arguments": call.arguments}
            if call.raw_arguments is not None:
                entry["raw_arguments"] = call.raw_arguments
            calls.append(entry)
        record["tool_calls"] = calls
    if message.tool_call_id is not None:
        record["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        record["name"] = message.name
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _decode(line: str) -> Message | None:
    try:
        record = json.loads(line)
        calls = tuple(
            ToolCall(
                id=str(c["id"]),
                name=str(c["name"]),
                arguments=dict(c.get("arguments") or {}),
                raw_arguments=c.get("raw_arguments"),
            )
            for c in record.get("tool_calls", ())
        )
        return Message(
            role=Role(record["role"]),
            content=str(record.get("content", "")),
            tool_calls=calls,
            tool_call_id=record.get("tool_call_id"),
            name=record.get("name"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class JsonlSessionStore:
    """Sessions under ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}.jsonl"

    def _read(self, path: Path) -> list[Message]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return [m for m in map(_decode, text.splitlines()) if m is not None]

    def _write(self, path: Path, payload: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, payload.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    async def load(self, session_id: str, *, limit: int | None = None) -> tuple[Message, ...]:
        path = self._path(session_id)
        if limit is not None and limit < 0:
            raise ConfigurationError(f"limit must be >= 0, got {limit}.")
        messages = await asyncio.to_thread(self._read, path)
        if limit is not None:
            messages = messages[len(messages) - limit :] if limit else []
        return tuple(messages)

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        path = self._path(session_id)
        if not messages:
            return
        payload = "".join(_encode(m) + "\n" for m in messages)
        await asyncio.to_thread(self._write, path, payload)

    def _list(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.jsonl"))

    def _delete(self, path: Path) -> None:
        lock = Path(str(path) + ".lock")
        with FileLock(str(lock)):
            path.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)

    async def sessions(self) -> list[str]:
        return await asyncio.to_thread(self._list)

    async def delete(self, session_id: str) -> None:
        await asyncio.to_thread(self._delete, self._path(session_id))
