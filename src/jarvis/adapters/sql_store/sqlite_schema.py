"""The SQLite schema, versioned by ``PRAGMA user_version``.

Each entry of :data:`MIGRATIONS` moves the database one version up; they run in one
``BEGIN IMMEDIATE`` transaction, so two processes opening a new database at once cannot both
create it, and a crash mid-migration leaves the previous version.

``sessions.touched`` (the rowid) numbers appends across sessions: each append moves its
session to the end, so listing the most recent sessions first reads the table in order.

Besides sessions, version 1 holds two tables for what several processes will share later:
``operator_state`` (key -> value, e.g. ``operator:<id>:state``) and ``leases`` (a named
lease with its holder and expiry, for schedulers that must run a tick exactly once).
Version 2 adds ``approvals``: managed agents' tool calls waiting for a decision
(:mod:`jarvis.adapters.sql_store.approvals`).
"""

from __future__ import annotations

import sqlite3

from jarvis.domain.sessions.records import SessionStoreCorruptError

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sessions (
        touched       INTEGER PRIMARY KEY,
        id            TEXT NOT NULL UNIQUE,
        created_us    INTEGER NOT NULL,
        updated_us    INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        title         TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,
        role       TEXT NOT NULL,
        created_us INTEGER NOT NULL,
        record     TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE operator_state (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        updated_us INTEGER NOT NULL
    );
    CREATE TABLE leases (
        name       TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_us INTEGER NOT NULL
    );
    """,
    """
    CREATE TABLE approvals (
        agent_id   TEXT NOT NULL,
        id         TEXT NOT NULL,
        tool       TEXT NOT NULL,
        arguments  TEXT NOT NULL,
        request    TEXT NOT NULL,
        status     TEXT NOT NULL,
        reason     TEXT NOT NULL DEFAULT '',
        created_us INTEGER NOT NULL,
        decided_us INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX approvals_by_call ON approvals (agent_id, tool, status);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
_OURS = {"sessions", "messages", "operator_state", "leases", "approvals", "approvals_by_call"}


def _version(connection: sqlite3.Connection) -> int:
    row = connection.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def migrate(connection: sqlite3.Connection, location: str) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`; refuse one that is not ours or newer."""
    if _version(connection) == SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = _version(connection)
        if version > SCHEMA_VERSION:
            raise SessionStoreCorruptError(
                f"The session database {location} has schema version {version}; this jarvis "
                f"knows versions up to {SCHEMA_VERSION}.",
                location=location,
                hint="Use the newer jarvis that wrote it, or another [sessions] path.",
            )
        if version == 0:
            names = {
                str(row[0])
                for row in connection.execute(
                    "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                )
            }
            if names - _OURS:
                raise SessionStoreCorruptError(
                    f"{location} is an SQLite database of something else (it has tables "
                    f"{', '.join(sorted(names - _OURS))}); it was left untouched.",
                    location=location,
                    hint="Point [sessions] path at a new file.",
                )
        for number in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[number].split(";"):
                if statement.strip():
                    connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
