"""``SqlBackend``: the SQL stores (sessions, operators, managed agents and their pending
approvals) over one driver.

They share one database, one connection and one lock: operators, managed agents and
approvals live next to the conversations they own, so whatever shares the sessions (the
processes of a machine for SQLite, many machines for PostgreSQL) shares them too.
"""

from __future__ import annotations

from jarvis.adapters.sql_store.approvals import SqlApprovalStore
from jarvis.adapters.sql_store.driver import SqlDriver
from jarvis.adapters.sql_store.managed_agents import SqlManagedAgentStore
from jarvis.adapters.sql_store.operators import SqlOperatorStore
from jarvis.adapters.sql_store.sessions import SqlSessionStore
from jarvis.domain.ports import SessionStorePort


class SqlBackend:
    """Sessions, operator state and leases, managed agents and their pending approvals in
    ``driver``'s database."""

    def __init__(self, driver: SqlDriver) -> None:
        self.driver = driver
        self.sessions = SqlSessionStore(driver)
        self.operators = SqlOperatorStore(driver)
        self.managed_agents = SqlManagedAgentStore(driver)
        self.approvals = SqlApprovalStore(driver)

    @classmethod
    def serving(cls, sessions: SessionStorePort) -> SqlBackend | None:
        """The backend whose session store ``sessions`` is (``None`` for any other store),
        so operators, managed agents and approvals can join a session store they are given."""
        if isinstance(sessions, SqlSessionStore):
            return cls(sessions.driver)
        return None

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        self.driver.close()
