"""``SqliteMemory``: MemoryPort over an SQLite database with an FTS5 index ranked by bm25.

User text never reaches FTS5's query language: the query is cut into words and each word
is sent as a quoted string, OR-ed together, so quotes, ``AND``/``NEAR``, ``*``, ``-`` or
``column:`` in a question are just text. bm25 then ranks entries that match more (and
rarer) words first. The Porter stemmer lets "running" find "run".

SQLite calls block, so they run in a worker thread; one connection is shared under a
lock. The database is opened on first use, not when the object is built.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Final

from jarvis.domain.agent_contract import MemoryHit
from jarvis.domain.json_types import JSONObject

MAX_QUERY_WORDS: Final = 64
_WORD = re.compile(r"\w+", re.UNICODE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content,
    content='memories',
    content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression that matches any word of ``text``, with no operators."""
    seen: list[str] = []
    for word in _WORD.findall(text):
        if word.casefold() not in (w.casefold() for w in seen):
            seen.append(word)
        if len(seen) == MAX_QUERY_WORDS:
            break
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in seen)


class SqliteMemory:
    """A persistent, searchable memory in one SQLite file (``":memory:"`` for a test)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            if self.path != ":memory:":
                Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, check_same_thread=False, timeout=10.0, isolation_level=None
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            self._connection = connection
        return self._connection

    def _store(self, content: str, source: str, metadata: JSONObject) -> str:
        memory_id = uuid.uuid4().hex
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                cursor = db.execute(
                    "INSERT INTO memories (id, content, source, metadata, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (memory_id, content, source, json.dumps(metadata), time.time()),
                )
                db.execute(
                    "INSERT INTO memories_fts (rowid, content) VALUES (?, ?)",
                    (cursor.lastrowid, content),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return memory_id

    def _search(self, query: str, top_k: int) -> list[MemoryHit]:
        expression = fts_query(query)
        if not expression or top_k <= 0:
            return []
        with self._lock:
            rows = (
                self._connect()
                .execute(
                    "SELECT m.content, m.source, bm25(memories_fts) AS rank "
                    "FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid "
                    "WHERE memories_fts MATCH ? ORDER BY rank, m.rowid LIMIT ?",
                    (expression, top_k),
                )
                .fetchall()
            )
        return [MemoryHit(content=c, source=s, score=-float(rank)) for c, s, rank in rows]

    async def store(
        self, content: str, *, source: str = "", metadata: JSONObject | None = None
    ) -> str:
        return await asyncio.to_thread(self._store, content, source, dict(metadata or {}))

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]:
        return await asyncio.to_thread(self._search, query, top_k)

    def close(self) -> None:
        """Close the database. Idempotent; a later call opens it again."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
