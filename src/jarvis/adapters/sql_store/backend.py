"""``SqlBackend``: the three SQL stores (sessions, operators, managed agents) over one driver.

They share one database, one connection and one lock: operators and managed agents live
next to the conversations they own, so whatever shares the sessions (the processes of a
machine for SQLite, many machines for PostgreSQL) shares them too.
"""

from __future__ import annotations

from jarvis.adapters.sql_store.driver import SqlDriver
from jarvis.adapters.sql_store.managed_agents import SqlManagedAgentStore
from jarvis.adapters.sql_store.operators import SqlOperatorStore
from jarvis.adapters.sql_store.sessions import SqlSessionStore
from jarvis.domain.ports import SessionStorePort


class SqlBackend:
    """Sessions, operator state and leases, and managed agents in ``driver``'s database."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver
        self.sessions = SqlSessionStore(driver)
        self.operators = SqlOperatorStore(driver)
        self.managed_agents = SqlManagedAgentStore(driver)

    @classmethod
    def serving(cls, sessions: SessionStorePort) -> SqlBackend | None:
        """The backend whose session store ``sessions`` is (``None`` for any other store),
        so operators and managed agents can join a session store they are given."""
        if isinstance(sessions, SqlSessionStore):
            return cls(sessions.driver)
        return None

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        self.driver.close()
