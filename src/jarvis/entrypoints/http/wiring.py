"""The server's state built on a runtime: the ask use case, the session store, managed agents.

``jarvis serve`` and embedding applications call :func:`server_state` with the runtime from
:func:`~jarvis.entrypoints.bootstrap.bootstrap`; the stores default to the runtime's
``[sessions]`` store (SQLite or PostgreSQL) and the definitions kept in its database.
"""

from __future__ import annotations

from jarvis.application.managed_agents import ManagedAgentService
from jarvis.domain.managed_agents import ManagedAgentStorePort
from jarvis.domain.ports import SessionStorePort
from jarvis.entrypoints.conversations import history_limits
from jarvis.entrypoints.http.state import ServeLimits, ServerState
from jarvis.entrypoints.runtime import Runtime


def server_state(
    runtime: Runtime,
    *,
    limits: ServeLimits | None = None,
    sessions: SessionStorePort | None = None,
    agents: ManagedAgentStorePort | None = None,
) -> ServerState:
    """Everything the routes use, over ``runtime`` (stores: the runtime's, unless given)."""
    if sessions is None:
        sessions = runtime.container.sessions()
    if agents is None:
        from jarvis.entrypoints.container import managed_agent_store

        agents = managed_agent_store(sessions)
    config = runtime.config
    limits = limits or ServeLimits()
    from jarvis.application.managed_approvals import ManagedApprovals
    from jarvis.entrypoints.container import approval_store

    approvals = ManagedApprovals(
        approval_store(sessions), timeout=config.tools.approval.approval_timeout
    )
    managed = ManagedAgentService(
        approvals=approvals,
        agents=agents,
        sessions=sessions,
        ask=runtime.service,
        limits=history_limits(config),
        max_agents=limits.max_agents,
        max_queued_messages=limits.max_queued_messages,
    )
    return ServerState(service=runtime.service, managed=managed, limits=limits)
