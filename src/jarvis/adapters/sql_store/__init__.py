"""Sessions, operator state, managed agents and approvals in one SQL database, written once.

:class:`SqlBackend` holds the stores over a driver: ``SqliteDriver`` (the embedded
default, one file shared by the processes of a machine) or ``PostgresDriver`` (a server
shared by many machines, psycopg 3). Import the driver from its own module, so a process
loads only the database library it uses.
"""

from jarvis.adapters.sql_store.approvals import SqlApprovalStore
from jarvis.adapters.sql_store.backend import SqlBackend
from jarvis.adapters.sql_store.managed_agents import SqlManagedAgentStore
from jarvis.adapters.sql_store.operators import SqlOperatorStore
from jarvis.adapters.sql_store.sessions import SqlSessionStore

__all__ = [
    "SqlApprovalStore",
    "SqlBackend",
    "SqlManagedAgentStore",
    "SqlOperatorStore",
    "SqlSessionStore",
]
