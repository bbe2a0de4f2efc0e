"""Sessions, operator state, managed agents and approvals in one SQL database, written once.

:class:`SqlBackend` holds the stores over a driver: ``SqliteDriver`` (the embedded
default, one file shared by the processes of a machine) or ``PostgresDriver`` (a server
shared by many machines, psycopg 3). Import the driver from its own module, so a process
loads only the database library it uses. Each name below is imported from its module when
it is first used, so a process that only keeps sessions (``jarvis ask``) loads none of the
other stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_MODULE_OF: dict[str, str] = {
    "SqlApprovalStore": "jarvis.adapters.sql_store.approvals",
    "SqlBackend": "jarvis.adapters.sql_store.backend",
    "SqlManagedAgentStore": "jarvis.adapters.sql_store.managed_agents",
    "SqlOperatorStore": "jarvis.adapters.sql_store.operators",
    "SqlSessionStore": "jarvis.adapters.sql_store.sessions",
}


def __getattr__(name: str) -> object:
    """The store ``name``, from its module (imported on first use)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'jarvis.adapters.sql_store' has no attribute {name!r}")
    from importlib import import_module

    value: object = getattr(import_module(module), name)
    return value
