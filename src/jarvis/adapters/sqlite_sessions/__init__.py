"""Conversation history in one SQLite database (WAL): the embedded default session store."""

from jarvis.adapters.sqlite_sessions.store import SqliteSessionStore

__all__ = ["SqliteSessionStore"]
