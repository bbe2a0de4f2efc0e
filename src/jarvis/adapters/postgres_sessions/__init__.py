"""Conversation history in PostgreSQL (psycopg 3): sessions shared by jarvis on many machines."""

from jarvis.adapters.postgres_sessions.store import PostgresSessionStore
from jarvis.adapters.postgres_sessions.urls import redact_url

__all__ = ["PostgresSessionStore", "redact_url"]
