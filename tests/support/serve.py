"""``jarvis serve``'s application on a free loopback port, in a thread, over fakes or a real engine.

The server runs the real application (FastAPI on uvicorn) with a real :class:`Runtime`:
only the engine is swapped (a scripted, gated or llama.cpp engine) and the stores are the
in-memory fakes unless a test passes real ones. :func:`serving` returns once the server
listens, so no test waits on a timer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from jarvis.application.managed_agents import ManagedAgentService
from jarvis.application.managed_approvals import ManagedApprovals
from jarvis.domain.managed_agents import ManagedAgentStorePort
from jarvis.domain.ports import InferencePort, SessionStorePort, ToolPort
from jarvis.entrypoints.composition import Runtime, bootstrap
from jarvis.entrypoints.http.app import create_app
from jarvis.entrypoints.http.server import ServerThread
from jarvis.entrypoints.http.state import ServeLimits, ServerState
from jarvis.entrypoints.settings import EngineOverrides, load_config
from jarvis.testing import InMemorySessionStore
from jarvis.testing.managed_agents import InMemoryManagedAgentStore

API_KEY = "test-key-0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Served:
    url: str
    state: ServerState
    sessions: SessionStorePort
    agents: ManagedAgentStorePort
    runtime: Runtime


@contextmanager
def serving(
    inference: InferencePort | None = None,
    *,
    engine: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    tools: Sequence[ToolPort] = (),
    limits: ServeLimits | None = None,
    sessions: SessionStorePort | None = None,
    agents: ManagedAgentStorePort | None = None,
    cors_origins: Sequence[str] = (),
    fast_path: bool = True,
    approvals: ManagedApprovals | None = None,
    uvicorn_protocol: bool = False,
) -> Iterator[Served]:
    """``uvicorn_protocol``: serve with uvicorn's own httptools protocol instead of jarvis's
    (as an application mounting jarvis's ASGI app in its own server would)."""
    config = load_config(overrides=EngineOverrides(engine=engine, base_url=base_url, model=model))
    runtime = bootstrap(config, inference=inference)
    runtime.container.user_tools().extend(tools)
    agents = InMemoryManagedAgentStore() if agents is None else agents
    owners = agents.holds if isinstance(agents, InMemoryManagedAgentStore) else None
    sessions = InMemorySessionStore(owners=owners) if sessions is None else sessions
    limits = limits or ServeLimits()
    managed = ManagedAgentService(
        agents=agents,
        sessions=sessions,
        ask=runtime.service,
        max_agents=limits.max_agents,
        max_queued_messages=limits.max_queued_messages,
        approvals=approvals,
    )
    state = ServerState(service=runtime.service, managed=managed, limits=limits)
    app = create_app(state, api_key=api_key, cors_origins=cors_origins, fast_path=fast_path)
    server = ServerThread(app)
    if uvicorn_protocol:
        server.server.config.http = "httptools"  # read when the server starts
    with server as address:
        yield Served(address.url, state, sessions, agents, runtime)
