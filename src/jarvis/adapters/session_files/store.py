"""``JsonlSessionStore``: one append-only JSON-lines file per session.

Appends are serialised by a per-session file lock and written with one ``write`` call plus
``fsync``, so concurrent writers (a server and a scheduled operative) never interleave
half lines. A torn last line (a crash mid-write) is skipped on load, never fatal.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from jarvis.adapters.sqlite_files import owner_only
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.owners import Owner
from jarvis.domain.sessions.ids import check_session_id
from jarvis.domain.sessions.records import (
    PAGE_SIZE,
    SessionInfo,
    SessionMessage,
    SessionPage,
    SessionStoreUnavailableError,
    check_page_bounds,
    check_page_size,
    decode_record,
    encode_record,
    page_of,
    title_of,
    to_micros,
)
from jarvis.domain.sessions.store_defaults import MessagesFromRecords, check_limit, newest


def _refuse(owner: Owner | None) -> None:
    """Refuse a call that names its owner: there is no definition here to check it against."""
    if owner is not None:
        raise ConfigurationError(
            f"The jsonl session store keeps no definitions to check the {owner.what} against.",
            hint='Managed agents and operators need [sessions] backend = "sqlite" or "postgres".',
        )


def _decode(line: str) -> SessionMessage | None:
    try:
        return decode_record(line)
    except ValueError:
        return None


class JsonlSessionStore(MessagesFromRecords):
    """Sessions under ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}.jsonl"

    def _read(self, path: Path) -> list[SessionMessage]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionStoreUnavailableError(
                f"Cannot read the session file {path}: {exc.strerror}.", location=str(path)
            ) from exc
        # "\n" only: str.splitlines() would also cut at U+2028 and others, which JSON
        # text written with ensure_ascii=False holds raw
        return [m for m in map(_decode, text.split("\n")) if m is not None]

    def _write(self, path: Path, payload: str) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # a folder made here
            with FileLock(str(path) + ".lock"):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    owner_only(fd, path)  # an older file made readable by others: 0600
                    os.write(fd, payload.encode("utf-8"))
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise SessionStoreUnavailableError(
                f"Cannot write the session file {path}: {exc.strerror}.", location=str(path)
            ) from exc

    async def load_records(
        self, session_id: str, *, limit: int | None = None
    ) -> tuple[SessionMessage, ...]:
        path = self._path(session_id)
        check_limit(limit)
        records = await asyncio.to_thread(self._read, path)
        return tuple(newest(records, limit))

    async def iter_records(
        self, session_id: str, *, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[SessionMessage]:
        path = self._path(session_id)
        check_page_size(page_size)
        try:
            handle = await asyncio.to_thread(path.open, "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise SessionStoreUnavailableError(
                f"Cannot read the session file {path}: {exc.strerror}.", location=str(path)
            ) from exc
        try:
            while True:
                lines = await asyncio.to_thread(self._read_lines, handle, path, page_size)
                for line in lines:
                    record = _decode(line.decode("utf-8", "replace"))
                    if record is not None:
                        yield record
                if len(lines) < page_size:
                    return
        finally:
            handle.close()

    @staticmethod
    def _read_lines(handle: BinaryIO, path: Path, count: int) -> list[bytes]:
        """Up to ``count`` lines of ``handle`` (cut at ``\\n`` only, as :meth:`_read`)."""
        try:
            lines = []
            for _ in range(count):
                line = handle.readline()
                if not line:
                    break
                lines.append(line)
            return lines
        except OSError as exc:
            raise SessionStoreUnavailableError(
                f"Cannot read the session file {path}: {exc.strerror}.", location=str(path)
            ) from exc

    async def load_page(
        self, session_id: str, *, limit: int, before: int | None = None
    ) -> SessionPage:
        """Read whole, as :meth:`load_records` (a JSON lines file has no index)."""
        path = self._path(session_id)
        check_page_bounds(limit, before)
        records = await asyncio.to_thread(self._read, path)
        return page_of(records, limit=limit, before=before)

    async def append_records(
        self, session_id: str, records: Sequence[SessionMessage], *, owner: Owner | None = None
    ) -> None:
        path = self._path(session_id)
        _refuse(owner)
        if not records:
            return
        payload = "".join(encode_record(r) + "\n" for r in records)
        await asyncio.to_thread(self._write, path, payload)

    def _list(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.jsonl"))

    def _infos(self) -> list[SessionInfo]:
        infos = []
        for session_id in self._list():
            records = self._read(self._path(session_id))
            if not records:
                continue
            infos.append(
                SessionInfo(
                    id=session_id,
                    message_count=len(records),
                    created_us=to_micros(records[0].created_at),
                    updated_us=max(to_micros(r.created_at) for r in records),
                    title=title_of(records),
                )
            )
        infos.sort(key=lambda i: i.id)
        infos.sort(key=lambda i: i.updated_us, reverse=True)
        return infos

    def _delete(self, path: Path) -> None:
        lock = Path(str(path) + ".lock")
        with FileLock(str(lock)):
            path.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)

    async def sessions(self) -> list[str]:
        return await asyncio.to_thread(self._list)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        check_limit(limit)
        infos = await asyncio.to_thread(self._infos)
        return infos if limit is None else infos[:limit]

    async def delete(self, session_id: str, *, owner: Owner | None = None) -> None:
        path = self._path(session_id)
        _refuse(owner)
        await asyncio.to_thread(self._delete, path)
