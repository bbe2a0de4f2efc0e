"""What every route shares: the ask use case, managed agents, and the server's limits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from jarvis.application.ask import AskService
from jarvis.application.managed_agents import ManagedAgentService
from jarvis.entrypoints.http.run_policy import RunPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeLimits:
    """Bounds on what one request may ask of the server."""

    max_body_bytes: int = 8 * 1024 * 1024
    """The largest request body (413 beyond)."""
    max_message_chars: int = 2_000_000
    """The most text one request's messages may hold (413 beyond)."""
    body_timeout: float = 30.0
    """Seconds the whole request body may take to arrive (408 beyond)."""
    request_timeout: float = 600.0
    """Seconds a non-streamed request may take (504 beyond)."""
    stream_timeout: float = 1800.0
    """Seconds a stream may last; then an error event, the final chunk and ``[DONE]``."""
    max_output_tokens: int = 8192
    """The most tokens a compatible endpoint asks the engine for, whatever the client
    requests (Claude Code asks for 32 000 and more)."""


@dataclass(slots=True, kw_only=True)
class ServerState:
    """The application's state (``app.state.jarvis``)."""

    service: Callable[[], Awaitable[AskService]]
    """The ask use case of the running loop (built on first use: the engine choice)."""
    managed: ManagedAgentService
    limits: ServeLimits = field(default_factory=ServeLimits)
    active_runs: int = 0
    """Runs being streamed now (a client that disconnects ends its run at once)."""
    engine_models: tuple[str, ...] | None = None
    """The engine's models, listed once (``/v1/messages`` passes a listed name through)."""
    policy: RunPolicy = field(default_factory=RunPolicy)
    """The agent options and runtimes the operator allowed over HTTP."""
