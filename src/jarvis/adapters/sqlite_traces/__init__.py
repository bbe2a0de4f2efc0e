"""Traces in one SQLite database (WAL, mode 0600): ``[traces] db_path``."""

from jarvis.adapters.sqlite_traces.store import SqliteTraceStore

__all__ = ["SqliteTraceStore"]
