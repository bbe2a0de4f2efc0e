"""The stores: conversations (``[sessions]``), and what lives in the same database.

Operator state and managed-agent definitions are kept in the session store's own database
(SQLite or PostgreSQL), so that they are shared by whatever shares the sessions. Which
store class serves which backend is decided here and nowhere else; each adapter (and
sqlite3 or psycopg) is imported only when a store is first needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis.application.config import JarvisConfig
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.ports import EmbeddingPort, MemoryPort, OperatorStorePort, SessionStorePort
from jarvis.entrypoints.settings import config_dir

if TYPE_CHECKING:
    from jarvis.domain.approval_store import ApprovalStorePort
    from jarvis.domain.managed_agents import ManagedAgentStorePort


def file_notice(message: str) -> None:
    """A store's file that other users may read (:mod:`jarvis.adapters.sqlite_files`): one
    line on stderr each time the store opens it, until the user acts on it."""
    from jarvis.entrypoints.terminal_text import write_stderr

    write_stderr(f"jarvis: {message}\n")


def _open_session_store(config: JarvisConfig) -> SessionStorePort:
    chosen = config.sessions
    if chosen.backend == "postgres":
        if not chosen.url:
            raise ConfigurationError(
                '[sessions] backend = "postgres" needs a url.',
                hint='Set [sessions] url = "postgresql://user:password@host/db".',
            )
        from jarvis.adapters.sql_store.postgres_driver import PostgresDriver
        from jarvis.adapters.sql_store.sessions import SqlSessionStore

        return SqlSessionStore(PostgresDriver(chosen.url))
    if chosen.backend == "jsonl":
        from jarvis.adapters.session_files.store import JsonlSessionStore

        return JsonlSessionStore(config_dir() / "sessions")
    from jarvis.adapters.sql_store.sessions import SqlSessionStore
    from jarvis.adapters.sql_store.sqlite_driver import SqliteDriver

    path = config_dir() / Path(chosen.path or "sessions.db").expanduser()
    driver = SqliteDriver(path, busy_timeout=chosen.busy_timeout, notice=file_notice)
    return SqlSessionStore(driver)  # the other stores join it when used (SqlBackend.serving)


def session_store(config: JarvisConfig) -> Iterator[SessionStorePort]:
    """The ``[sessions]`` store (a ``Resource``): its connection is closed by
    ``shutdown_resources()`` (and opened again by a later call)."""
    store = _open_session_store(config)
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def operator_store(sessions: SessionStorePort) -> OperatorStorePort:
    """Operator state and leases, in the session store's own database (SQLite or
    PostgreSQL), so operators share whatever the sessions share."""
    from jarvis.adapters.sql_store.backend import SqlBackend

    backend = SqlBackend.serving(sessions)
    if backend is not None:
        return backend.operators
    raise ConfigurationError(
        "Operators keep their state in the sqlite or postgres session store.",
        hint='Set [sessions] backend = "sqlite" (the default) or "postgres".',
    )


def managed_agent_store(sessions: SessionStorePort) -> ManagedAgentStorePort:
    """Managed agent definitions in ``sessions``' own database (``jarvis serve``): the
    SQLite file or the PostgreSQL server every server on it shares."""
    from jarvis.adapters.sql_store.backend import SqlBackend

    backend = SqlBackend.serving(sessions)
    if backend is not None:
        return backend.managed_agents
    raise ConfigurationError(
        "Managed agents need the SQLite or PostgreSQL session store.",
        hint='Set [sessions] backend = "sqlite" (the default) or "postgres".',
    )


def approval_store(sessions: SessionStorePort, agents: ManagedAgentStorePort) -> ApprovalStorePort:
    """Managed agents' pending approvals in ``sessions``' own database (``jarvis serve``);
    kept in memory, for this process only, over any other session store: there a run's
    writes are checked against ``agents`` when it is the in-memory store too (any other
    cannot be asked in the write's step, so they are refused, as the in-memory session
    store refuses them)."""
    from jarvis.adapters.sql_store.backend import SqlBackend

    backend = SqlBackend.serving(sessions)
    if backend is not None:
        return backend.approvals
    from jarvis.testing.approvals import InMemoryApprovalStore
    from jarvis.testing.managed_agents import InMemoryManagedAgentStore

    owners = agents.holds if isinstance(agents, InMemoryManagedAgentStore) else None
    return InMemoryApprovalStore(owners=owners)


def keyword_index() -> MemoryPort:
    """A fresh in-memory SQLite FTS5 index (``monitor_operative``'s keyword recall)."""
    from jarvis.adapters.sqlite_memory.store import SqliteMemory

    return SqliteMemory(":memory:")


def embeddings(config: JarvisConfig | None = None) -> EmbeddingPort | None:
    """all-MiniLM-L6-v2 (``monitor_operative``'s semantic recall) when it and its libraries
    are installed, else ``None`` (semantic retrieval then says how to install it), on
    ``[memory] embedding_threads`` BLAS threads. Nothing heavy is imported here: the model
    and numpy load on its first use."""
    from jarvis.adapters.minilm_embeddings import MiniLMEmbeddings, available

    if not available():
        return None
    if config is None:
        return MiniLMEmbeddings()
    return MiniLMEmbeddings(threads=config.memory.embedding_threads)
