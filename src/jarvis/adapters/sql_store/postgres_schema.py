"""The PostgreSQL schema, versioned in ``jarvis_schema``.

Migrations run in one transaction under an advisory lock, so jarvis processes starting at
once on several machines apply each exactly once. Every name starts with ``jarvis_``, so
the tables can live in a database shared with other programs.

Besides sessions, version 1 holds what several machines will share later:
``jarvis_operator_state`` (key -> value, e.g. ``operator:<id>:state``) and ``jarvis_leases``
(a named lease with its holder and expiry: a scheduler that takes the lease for a tick with
``INSERT ... ON CONFLICT DO UPDATE ... WHERE expires_us < now`` runs it, every other one
sees the lease taken).

Version 2 adds ``jarvis_approvals``: managed agents' tool calls waiting for a decision,
which any server on the database may give.

Messages are ``text`` holding the canonical JSON record (not ``jsonb``): the record comes
back byte for byte, and a NUL character escaped in JSON is kept, where ``jsonb`` refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.domain.sessions.records import SessionStoreCorruptError

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jarvis_sessions (
        id            text PRIMARY KEY,
        created_us    bigint NOT NULL,
        updated_us    bigint NOT NULL,
        touched       bigint NOT NULL,
        message_count integer NOT NULL,
        title         text NOT NULL DEFAULT ''
    );
    CREATE INDEX jarvis_sessions_by_touched ON jarvis_sessions (touched);
    CREATE SEQUENCE jarvis_session_touch;
    CREATE TABLE jarvis_messages (
        session_id text NOT NULL REFERENCES jarvis_sessions (id) ON DELETE CASCADE,
        seq        integer NOT NULL,
        role       text NOT NULL,
        created_us bigint NOT NULL,
        record     text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE jarvis_operator_state (
        key        text PRIMARY KEY,
        value      text NOT NULL,
        updated_us bigint NOT NULL
    );
    CREATE TABLE jarvis_leases (
        name       text PRIMARY KEY,
        holder     text NOT NULL,
        expires_us bigint NOT NULL
    );
    """,
    """
    CREATE TABLE jarvis_approvals (
        agent_id   text NOT NULL,
        id         text NOT NULL,
        tool       text NOT NULL,
        arguments  text NOT NULL,
        request    text NOT NULL,
        status     text NOT NULL,
        reason     text NOT NULL DEFAULT '',
        created_us bigint NOT NULL,
        decided_us bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX jarvis_approvals_by_call ON jarvis_approvals (agent_id, tool, status);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)

#: ``pg_advisory_xact_lock`` key of the migration (any fixed 64-bit number).
MIGRATION_LOCK = 0x6A61_7276_6973_0001

CREATE_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS jarvis_schema (version integer NOT NULL)"


def migrate(db: psycopg.Connection[TupleRow], location: str) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`, once across every process that starts at
    once (the advisory lock); refuse a newer one."""
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        db.execute(CREATE_VERSION_TABLE)
        row = db.execute("SELECT max(version) FROM jarvis_schema").fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise SessionStoreCorruptError(
                f"The session database {location} has schema version {version}; "
                f"this jarvis knows versions up to {SCHEMA_VERSION}.",
                location=location,
                hint="Use the newer jarvis that wrote it, or another database.",
            )
        for number in range(version, SCHEMA_VERSION):
            db.execute(MIGRATIONS[number].encode())
        if version < SCHEMA_VERSION:
            db.execute("DELETE FROM jarvis_schema")
            db.execute("INSERT INTO jarvis_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
