"""``SqliteMemory``: the memory (MemoryPort) and the knowledge base (KnowledgeStorePort) in
one SQLite file: text in an FTS5 index ranked by bm25, sentence vectors beside it.

User text never reaches FTS5's query language: the query is cut into words and each word
is sent as a quoted string, OR-ed together, so quotes, ``AND``/``NEAR``, ``*``, ``-`` or
``column:`` in a question are just text. bm25 then ranks entries that match more (and
rarer) words first. The Porter stemmer lets "running" find "run".

Vectors are float16 blobs in their own table, searched by a numpy scan (one matrix
product over every vector; see :mod:`.vectors`). The matrix is loaded on the first vector
search and kept until the database changes (SQLite's ``data_version`` for other
processes' writes, a counter for this one's).

The file is kept 0600 (:mod:`jarvis.adapters.sqlite_files`) in a 0700 folder. SQLite calls
block, so they run in a worker thread; one connection is shared under a lock. The database
is opened on first use, not when the object is built. A file that is not a readable SQLite
database raises :class:`~jarvis.domain.knowledge.MemoryStoreDamagedError` and is left as it
was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from jarvis.adapters.sqlite_files import private_database
from jarvis.adapters.sqlite_wal import enter_wal, is_busy
from jarvis.domain.json_types import JSONObject
from jarvis.domain.knowledge import (
    Chunk,
    ChunkVectors,
    KnowledgeStats,
    MemoryStoreBusyError,
    MemoryStoreDamagedError,
    SourceInfo,
    check_vectors,
)
from jarvis.domain.run.contract import MemoryHit

if TYPE_CHECKING:
    from jarvis.adapters.sqlite_memory.vectors import VectorMatrix

MAX_QUERY_WORDS: Final = 64
COMMON_ABOVE: Final = 10_000
"""Chunks from which a query leaves out its most common words (see ``_selective``)."""
COMMON_FRACTION: Final = 0.1
BUSY_TIMEOUT: Final = 10.0
"""Seconds to wait for another process holding the file (its lock, or its switch to WAL)."""
_WORD = re.compile(r"\w+", re.UNICODE)
T = TypeVar("T")

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
CREATE TABLE IF NOT EXISTS memory_sources (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL UNIQUE,
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_vectors (
    rowid INTEGER PRIMARY KEY,
    vector BLOB NOT NULL
);
"""
_CHUNK_COLUMNS = (
    ("source_id", "INTEGER"),
    ("line", "INTEGER NOT NULL DEFAULT 0"),
    ("end_line", "INTEGER NOT NULL DEFAULT 0"),
    ("content_hash", "TEXT NOT NULL DEFAULT ''"),
)


_OBJECTS = ("memories", "memories_fts", "memory_sources", "memory_vectors", "memories_by_source")
"""What :data:`_SCHEMA` and :func:`_bring_up_to_date` make, by name."""


def _is_current(connection: sqlite3.Connection) -> bool:
    """Whether every table, column and index is there (then opening takes no write lock)."""
    present = {row[1] for row in connection.execute("PRAGMA table_info(memories)")}
    (objects,) = connection.execute(
        f"SELECT count(*) FROM sqlite_master WHERE name IN ({', '.join('?' * len(_OBJECTS))})",
        _OBJECTS,
    ).fetchone()
    return objects == len(_OBJECTS) and all(name in present for name, _ in _CHUNK_COLUMNS)


def _bring_up_to_date(connection: sqlite3.Connection) -> None:
    """Create or extend the schema in one ``BEGIN IMMEDIATE`` transaction: processes opening
    one file at once take turns, so a column is never added twice."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                connection.execute(statement)
        present = {row[1] for row in connection.execute("PRAGMA table_info(memories)")}
        for name, declaration in _CHUNK_COLUMNS:
            if name not in present:
                connection.execute(f"ALTER TABLE memories ADD COLUMN {name} {declaration}")
        connection.execute("CREATE INDEX IF NOT EXISTS memories_by_source ON memories (source_id)")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


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
    """A persistent, searchable memory in one SQLite file (``":memory:"`` for a test);
    ``notice`` is told when the file stays readable by other users."""

    def __init__(
        self, path: str, *, embedding_model: str = "", notice: Callable[[str], None] | None = None
    ) -> None:
        self.path = path
        self.embedding_model = embedding_model
        self._notice = notice
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._writes = 0
        self._matrix: tuple[tuple[int, int], VectorMatrix] | None = None

    # --- opening ---------------------------------------------------------------------

    def _damaged(self, exc: BaseException) -> MemoryStoreDamagedError:
        return MemoryStoreDamagedError(
            f"The memory database {self.path} cannot be read: {exc}.",
            hint="It was left untouched. Move it aside (jarvis then starts an empty one) or "
            "point [tools.retrieval] db_path at another file.",
        )

    def _busy(self) -> MemoryStoreBusyError:
        return MemoryStoreBusyError(
            f"The memory database {self.path} stayed locked by another process for "
            f"{BUSY_TIMEOUT:g} s.",
            hint="This change was not made (what was done before it is kept); run it again "
            "when the other jarvis is done.",
        )

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        if self.path != ":memory:":
            file = Path(self.path).expanduser()
            if not file.parent.exists():
                file.parent.mkdir(parents=True, mode=0o700)
            try:  # an older file (and its -wal, -shm) may be open to others
                private_database(file, self._notice)
            except OSError as exc:
                raise self._damaged(exc) from None
        try:
            connection = sqlite3.connect(
                self.path, check_same_thread=False, timeout=BUSY_TIMEOUT, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise self._damaged(exc) from None
        try:
            enter_wal(connection, BUSY_TIMEOUT)
            # WAL with NORMAL: a crash never damages the file; a power cut may lose the
            # last transactions, which the next `memory add` or `sync` redoes
            connection.execute("PRAGMA synchronous=NORMAL")
            if not _is_current(connection):  # a reader of a current file takes no lock
                _bring_up_to_date(connection)
        except sqlite3.Error as exc:
            connection.close()
            raise (self._busy() if is_busy(exc) else self._damaged(exc)) from None
        self._connection = connection
        return connection

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            db = self._connect()
            try:
                return work(db)
            except sqlite3.DatabaseError as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise (self._busy() if is_busy(exc) else self._damaged(exc)) from None

    # --- MemoryPort ------------------------------------------------------------------

    def _store(self, content: str, source: str, metadata: JSONObject) -> str:
        memory_id = uuid.uuid4().hex

        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            cursor = db.execute(
                "INSERT INTO memories (id, content, source, metadata, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (memory_id, content, source, json.dumps(metadata), time.time()),
            )
            db.execute(
                "INSERT INTO memories_fts (rowid, content) VALUES (?, ?)",
                (cursor.lastrowid, content),
            )
            db.execute("COMMIT")
            self._writes += 1

        self._run(work)
        return memory_id

    def _selective(self, db: sqlite3.Connection, query: str) -> str:
        """The FTS5 expression of ``query`` without the words most chunks contain.

        bm25 scores every chunk that matches any word, so a word in most of 100,000 chunks
        (``the``, ``and``) costs a full scoring pass while adding almost nothing to the
        ranking (its inverse document frequency is near zero). Each word's chunks are
        counted up to :data:`COMMON_FRACTION` of all (an index walk, no scoring); the
        words past it are left out, unless every word is (then the query is kept whole).
        """
        expression = fts_query(query)
        total = db.execute("SELECT max(rowid) FROM memories").fetchone()[0] or 0
        if not expression or total < COMMON_ABOVE:
            return expression
        cap = int(total * COMMON_FRACTION)
        kept = []
        for word in expression.split(" OR "):
            found = db.execute(
                "SELECT count(*) FROM (SELECT rowid FROM memories_fts "
                "WHERE memories_fts MATCH ? LIMIT ?)",
                (word, cap),
            ).fetchone()[0]
            if found < cap:
                kept.append(word)
        return " OR ".join(kept) if kept else expression

    def _keyword(self, query: str, top_k: int) -> list[MemoryHit]:
        if not fts_query(query) or top_k <= 0:
            return []
        rows = self._run(
            lambda db: db.execute(
                "SELECT m.content, m.source, m.line, m.end_line, bm25(memories_fts) AS rank "
                "FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid "
                "WHERE memories_fts MATCH ? ORDER BY rank, m.rowid LIMIT ?",
                (self._selective(db, query), top_k),
            ).fetchall()
        )
        return [
            MemoryHit(content=c, source=s, score=-float(rank), line=line, end_line=end)
            for c, s, line, end, rank in rows
        ]

    async def store(
        self, content: str, *, source: str = "", metadata: JSONObject | None = None
    ) -> str:
        return await asyncio.to_thread(self._store, content, source, dict(metadata or {}))

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]:
        return await asyncio.to_thread(self._keyword, query, top_k)

    # --- KnowledgeStorePort ----------------------------------------------------------

    def _fingerprint(self, source: str) -> str | None:
        row = self._run(
            lambda db: db.execute(
                "SELECT fingerprint FROM memory_sources WHERE source = ?", (source,)
            ).fetchone()
        )
        return None if row is None else str(row[0])

    @staticmethod
    def _drop_chunks(db: sqlite3.Connection, source_id: int) -> None:
        rows = db.execute(
            "SELECT rowid, content FROM memories WHERE source_id = ?", (source_id,)
        ).fetchall()
        db.executemany(
            "INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', ?, ?)",
            rows,
        )
        db.executemany("DELETE FROM memory_vectors WHERE rowid = ?", [(r[0],) for r in rows])
        db.execute("DELETE FROM memories WHERE source_id = ?", (source_id,))

    def _replace(
        self, info: SourceInfo, chunks: Sequence[Chunk], vectors: ChunkVectors | None
    ) -> None:
        check_vectors(chunks, vectors)
        blobs: list[bytes] | None = None
        if vectors is not None and vectors:
            from jarvis.adapters.sqlite_memory.vectors import to_blobs

            blobs = to_blobs(vectors)

        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT id FROM memory_sources WHERE source = ?", (info.source,)
            ).fetchone()
            if row is not None:
                self._drop_chunks(db, int(row[0]))
                db.execute(
                    "UPDATE memory_sources SET fingerprint = ?, kind = ?, size_bytes = ?, "
                    "added_at = ? WHERE id = ?",
                    (info.fingerprint, info.kind, info.size_bytes, info.added_at, row[0]),
                )
                source_id = int(row[0])
            else:
                cursor = db.execute(
                    "INSERT INTO memory_sources (source, fingerprint, kind, size_bytes, "
                    "added_at) VALUES (?, ?, ?, ?, ?)",
                    (info.source, info.fingerprint, info.kind, info.size_bytes, info.added_at),
                )
                source_id = int(cursor.lastrowid or 0)
            now = time.time()
            for position, chunk in enumerate(chunks):
                cursor = db.execute(
                    "INSERT INTO memories (id, content, source, metadata, created_at, "
                    "source_id, line, end_line, content_hash) "
                    "VALUES (?, ?, ?, '{}', ?, ?, ?, ?, ?)",
                    (
                        uuid.uuid4().hex,
                        chunk.text,
                        info.source,
                        now,
                        source_id,
                        chunk.line,
                        chunk.end_line,
                        chunk.content_hash,
                    ),
                )
                rowid = cursor.lastrowid
                db.execute(
                    "INSERT INTO memories_fts (rowid, content) VALUES (?, ?)", (rowid, chunk.text)
                )
                if blobs is not None:
                    db.execute(
                        "INSERT INTO memory_vectors (rowid, vector) VALUES (?, ?)",
                        (rowid, blobs[position]),
                    )
            db.execute("COMMIT")
            self._writes += 1

        self._run(work)

    def _remove(self, source: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id FROM memory_sources WHERE source = ?", (source,)).fetchone()
            if row is None:
                db.execute("ROLLBACK")
                return False
            self._drop_chunks(db, int(row[0]))
            db.execute("DELETE FROM memory_sources WHERE id = ?", (row[0],))
            db.execute("COMMIT")
            self._writes += 1
            return True

        return self._run(work)

    def _sources(self) -> list[SourceInfo]:
        rows = self._run(
            lambda db: db.execute(
                "SELECT s.source, s.fingerprint, s.kind, s.size_bytes, s.added_at, "
                "(SELECT count(*) FROM memories AS m WHERE m.source_id = s.id) "
                "FROM memory_sources AS s ORDER BY s.source"
            ).fetchall()
        )
        return [
            SourceInfo(
                source=s, fingerprint=f, kind=k, size_bytes=int(b), added_at=float(a), chunks=n
            )
            for s, f, k, b, a, n in rows
        ]

    def _stats(self) -> KnowledgeStats:
        def work(db: sqlite3.Connection) -> tuple[int, int, int, int]:
            sources = db.execute("SELECT count(*) FROM memory_sources").fetchone()[0]
            chunks, size = db.execute(
                "SELECT count(*), coalesce(sum(length(CAST(content AS BLOB))), 0) FROM memories"
            ).fetchone()
            vectors = db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0]
            return int(sources), int(chunks), int(size), int(vectors)

        sources, chunks, size, vectors = self._run(work)
        on_disk = 0
        if self.path != ":memory:":
            for suffix in ("", "-wal"):
                with contextlib.suppress(OSError):
                    on_disk += os.stat(
                        Path(self.path).expanduser().with_name(Path(self.path).name + suffix)
                    ).st_size
        return KnowledgeStats(
            sources=sources,
            chunks=chunks,
            embedded_chunks=vectors,
            text_bytes=size,
            database_bytes=on_disk,
            location=self.path,
            embedding_model=self.embedding_model if vectors else "",
        )

    def _vectors(self) -> VectorMatrix:
        from jarvis.adapters.sqlite_memory.vectors import load_matrix

        def work(db: sqlite3.Connection) -> VectorMatrix:
            version = (int(db.execute("PRAGMA data_version").fetchone()[0]), self._writes)
            if self._matrix is not None and self._matrix[0] == version:
                return self._matrix[1]
            matrix = load_matrix(db)
            self._matrix = (version, matrix)
            return matrix

        return self._run(work)

    def _nearest(self, vector: Sequence[float], top_k: int) -> list[MemoryHit]:
        if top_k <= 0:
            return []
        ranked = self._vectors().nearest(vector, top_k)
        if not ranked:
            return []
        rowids = [rowid for rowid, _ in ranked]
        marks = ",".join("?" * len(rowids))
        rows = self._run(
            lambda db: db.execute(
                f"SELECT rowid, content, source, line, end_line FROM memories "
                f"WHERE rowid IN ({marks})",
                rowids,
            ).fetchall()
        )
        found = {row[0]: row for row in rows}
        return [
            MemoryHit(
                content=found[rowid][1],
                source=found[rowid][2],
                line=found[rowid][3],
                end_line=found[rowid][4],
                score=score,
            )
            for rowid, score in ranked
            if rowid in found
        ]

    async def fingerprint(self, source: str) -> str | None:
        return await asyncio.to_thread(self._fingerprint, source)

    async def replace_source(
        self, info: SourceInfo, chunks: Sequence[Chunk], vectors: ChunkVectors | None
    ) -> None:
        await asyncio.to_thread(self._replace, info, list(chunks), vectors)

    async def remove_source(self, source: str) -> bool:
        return await asyncio.to_thread(self._remove, source)

    async def sources(self) -> list[SourceInfo]:
        return await asyncio.to_thread(self._sources)

    async def stats(self) -> KnowledgeStats:
        return await asyncio.to_thread(self._stats)

    async def keyword_search(self, query: str, *, top_k: int) -> list[MemoryHit]:
        return await asyncio.to_thread(self._keyword, query, top_k)

    async def vector_search(self, vector: Sequence[float], *, top_k: int) -> list[MemoryHit]:
        return await asyncio.to_thread(self._nearest, vector, top_k)

    def close(self) -> None:
        """Close the database. Idempotent; a later call opens it again."""
        with self._lock:
            self._matrix = None
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
