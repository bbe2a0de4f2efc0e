"""The memory backend on SQLite's FTS5 full-text index (embedded, no server)."""

from jarvis.adapters.sqlite_memory.store import SqliteMemory

__all__ = ["SqliteMemory"]
