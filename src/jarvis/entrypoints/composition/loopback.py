"""``claude_code``'s Anthropic-compatible endpoint on loopback, and the server state it serves.

The endpoint serves ``/v1/messages`` over the engine of the run that started it, with the
built-in agents and nothing else of the configuration (the runner sends its own system
prompt and tools). Its managed-agent routes are not mounted, so its managed-agent service
(over in-memory stores) is never reached. Imported when that agent first runs: the web
server costs every other question start-up time.
"""

from __future__ import annotations

from jarvis.application.ask import AskService
from jarvis.application.managed_agents import ManagedAgentService
from jarvis.application.registry import builtin_agents
from jarvis.domain.ports import InferencePort
from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint
from jarvis.entrypoints.http.protocol import HEADER_DEADLINE
from jarvis.entrypoints.http.state import ServeLimits, ServerState
from jarvis.testing import InMemorySessionStore
from jarvis.testing.managed_agents import InMemoryManagedAgentStore


def loopback_state(engine: InferencePort, model: str, limits: ServeLimits) -> ServerState:
    """The Anthropic routes' state over ``engine``: the ask use case with the built-in
    agents on that engine and ``model``."""
    service = AskService(registry=builtin_agents(), inference=engine, default_model=model or None)

    async def ask() -> AskService:
        return service

    agents = InMemoryManagedAgentStore()
    managed = ManagedAgentService(
        agents=agents, sessions=InMemorySessionStore(owners=agents.holds), ask=ask
    )
    return ServerState(service=ask, managed=managed, limits=limits)


def loopback_endpoint(
    *, limits: ServeLimits | None = None, header_deadline: float = HEADER_DEADLINE
) -> LoopbackEndpoint:
    """A stopped endpoint (it starts on the first run of ``claude_code``)."""
    return LoopbackEndpoint(loopback_state, limits=limits, header_deadline=header_deadline)
