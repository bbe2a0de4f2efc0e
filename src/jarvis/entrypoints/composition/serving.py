"""The server's state built on a runtime: the ask use case, the session store, managed agents.

``jarvis serve``, ``jarvis mcp serve`` and embedding applications call :func:`server_state`
with the runtime from :func:`~jarvis.entrypoints.composition.bootstrap`; the stores default
to the runtime's ``[sessions]`` store (SQLite or PostgreSQL) and the definitions kept in
its database.
"""

from __future__ import annotations

from jarvis.domain.managed_agents import ManagedAgentStorePort
from jarvis.domain.ports import SessionStorePort
from jarvis.entrypoints.composition.runtime import Runtime
from jarvis.entrypoints.http.state import ServeLimits, ServerState


def server_state(
    runtime: Runtime,
    *,
    limits: ServeLimits | None = None,
    sessions: SessionStorePort | None = None,
    agents: ManagedAgentStorePort | None = None,
) -> ServerState:
    """Everything the routes use, over ``runtime`` (stores: the runtime's, unless given)."""
    limits = limits or ServeLimits()
    managed = runtime.managed_agents(limits, sessions=sessions, agents=agents)
    return ServerState(service=runtime.service, managed=managed, limits=limits)
