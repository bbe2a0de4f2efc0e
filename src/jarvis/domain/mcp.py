"""Model Context Protocol servers as tool sources: what jarvis needs from an MCP client.

An MCP server (a local process spoken to over stdio, or a streamable HTTP endpoint) lists
tools and runs them. :class:`McpClientPort` is one connection to one server; the
application turns each listed tool into an ordinary ``ToolPort``, so the agents' loops
never see MCP at all. The fake (``jarvis.testing.mcp``) and the SDK adapter
(``jarvis.adapters.mcp_sdk``) both pass ``contracts/mcp_client_contract.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from jarvis.domain.errors import ToolError
from jarvis.domain.json_types import JSONObject, JSONValue

MCP_SAFE_ENVIRONMENT = ("PATH", "HOME", "LANG")
"""The only variables of jarvis's own environment a stdio server inherits: no API key of
the host reaches a server unless its configuration names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpEndpoint:
    """Where a server is: ``command`` (stdio) or ``url`` (streamable HTTP). Written once for
    the spec a client connects with and for the configuration table it comes from.

    ``env`` is added to :data:`MCP_SAFE_ENVIRONMENT`; ``headers`` go with every HTTP
    request.
    """

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerSpec(McpEndpoint):
    """How to reach one server, and how long it may take.

    ``startup_timeout`` bounds the start and the first listing of tools, ``timeout`` every
    call.
    """

    name: str
    startup_timeout: float = 30.0
    timeout: float = 60.0

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpToolInfo:
    """One tool as its server lists it. The hints are the server's own claims (``None``:
    not said), kept on the tool spec. They confine nothing: the one thing they decide is
    the built-in approval default, under which a tool its server declares read-only runs
    unasked (as the README says; a ``[tools.approval]`` rule or ``--approve`` decides
    instead when one is set)."""

    name: str
    description: str = ""
    input_schema: JSONObject = field(default_factory=lambda: {"type": "object"})
    title: str = ""
    read_only: bool | None = None
    destructive: bool | None = None


McpContentKind = Literal["text", "image", "audio", "resource", "resource_link"]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpContent:
    """One block of a tool's result. Binary blocks (images, audio, blob resources) carry
    their type and decoded size, never their bytes: a model is told what came back."""

    kind: McpContentKind
    text: str = ""
    mime_type: str = ""
    size_bytes: int = 0
    uri: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpCallResult:
    """A tool's result: its blocks, its structured content, and whether it is an error
    the tool itself reported (``isError``)."""

    content: tuple[McpContent, ...] = ()
    structured: JSONValue | None = None
    is_error: bool = False


class McpError(ToolError):
    """An MCP server could not be used: it did not start, crashed, broke the protocol or
    did not answer in time. Inside a run this becomes a failed tool result."""

    def __init__(self, message: str, *, server: str, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.server = server


class McpServerDownError(McpError):
    """The server is not running (it failed to start, crashed or closed the connection)."""


class McpTimeoutError(McpError):
    """The server did not answer within the start-up or call timeout."""


class McpClientPort(Protocol):
    """One connection to one MCP server, used by one event loop.

    Calls may run concurrently. Every method bounds its time, and every failure is an
    :class:`McpError` (never a transport's own exception, never a hang): a fault of the
    server can fail a tool call but never the run.
    """

    @property
    def name(self) -> str:
        """The server's configured name."""
        ...

    @property
    def running(self) -> bool:
        """Whether the connection is up (started and not crashed nor closed)."""
        ...

    async def start(self) -> tuple[McpToolInfo, ...]:
        """Connect (spawn the process, or open the HTTP session), initialise and list the
        tools, within the spec's ``startup_timeout``. Raises ``McpTimeoutError`` past it,
        ``McpServerDownError`` when the server cannot be started or dies; nothing is left
        running after a failed start. Starting a running client lists its tools again."""
        ...

    async def call_tool(self, name: str, arguments: JSONObject, *, timeout: float) -> McpCallResult:
        """Run tool ``name``. A result the tool marks as an error is returned with
        ``is_error``; ``McpTimeoutError`` after ``timeout`` seconds (the request is
        cancelled and the connection stays usable); ``McpServerDownError`` when the server
        is not running or dies during the call; ``McpError`` for a protocol error."""
        ...

    def stderr_tail(self) -> str:
        """The last part of what the server wrote on its stderr (bounded; "" for HTTP)."""
        ...

    async def aclose(self) -> None:
        """Stop the server (close its stdin, then terminate and kill its process group)
        or end the HTTP session, bounded in time. Idempotent; never raises. Called on the
        event loop the client was started on."""
        ...

    def close_now(self) -> None:
        """Kill a stdio server's process group at once, without awaiting: for a client
        whose event loop is gone or is not the caller's. Idempotent; never raises."""
        ...
