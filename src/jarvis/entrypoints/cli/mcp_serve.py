"""``jarvis mcp serve``: the runtime of ``jarvis ask``'s options, offered as an MCP server.

Loaded only when the command runs (the ``mcp`` SDK is not imported by ``jarvis --help``).
The tools run on the composition root's services: the runtime from
:func:`~jarvis.entrypoints.composition.bootstrap` and the server state ``jarvis serve``
builds over it (the session store, managed agents), under the same run policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jarvis.domain.errors import ConfigurationError

if TYPE_CHECKING:
    from mcp.server import Server

    from jarvis.entrypoints.composition import Runtime


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServeSpec:
    """What the client may ask a run to do (``--allow-option``, ``--enable-runtime``)."""

    allowed_options: tuple[str, ...] = ()
    enabled_runtimes: tuple[str, ...] = ()
    max_body_bytes: int = 8 * 1024 * 1024


def require_packages(*, http: bool) -> None:
    """The ``mcp`` SDK (and for ``--http`` the web server) must be installed: else a usage
    error saying which extra installs them (exit code 2), never a traceback."""
    import importlib.util

    needed = {"mcp": "mcp"} | ({"uvicorn": "serve", "starlette": "serve"} if http else {})
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        extras = ",".join(sorted({needed[name] for name in missing}))
        raise ConfigurationError(
            "jarvis mcp serve needs " + " and ".join(missing) + ", which are not installed.",
            hint=f"Install them with: pip install 'jarvis[{extras}]'",
        )


def build(runtime: Runtime, spec: McpServeSpec) -> Server[Any]:
    """The MCP server over ``runtime``."""
    from importlib.metadata import PackageNotFoundError, version

    from jarvis.entrypoints.composition.serving import server_state
    from jarvis.entrypoints.http.run_policy import RunPolicy
    from jarvis.entrypoints.mcp_server.catalogue import JarvisTools
    from jarvis.entrypoints.mcp_server.sdk_server import build_server

    state = server_state(runtime)
    state.policy = RunPolicy.of(options=spec.allowed_options, runtimes=spec.enabled_runtimes)
    try:
        own_version = version("jarvis")
    except PackageNotFoundError:
        own_version = ""
    return build_server(JarvisTools(runtime=runtime, state=state), version=own_version)


def serve_stdio(runtime: Runtime, spec: McpServeSpec) -> None:
    """Serve on stdin/stdout until stdin ends; then nothing this server started runs on."""
    import asyncio

    from jarvis.entrypoints.mcp_server import sdk_server

    server = build(runtime, spec)

    async def main() -> None:
        try:
            await sdk_server.serve_stdio(server)
        finally:
            await runtime.aclose()

    asyncio.run(main())


def serve_http(
    runtime: Runtime,
    spec: McpServeSpec,
    *,
    host: str,
    port: int,
    api_key: str | None,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    allowed_uids: tuple[int, ...],
    verbose: bool,
) -> None:
    """Serve streamable HTTP on ``host:port`` behind ``jarvis serve``'s guards."""
    from jarvis.entrypoints.http.listener_guard import ListenerPolicy
    from jarvis.entrypoints.http.mcp_listener import guarded_mcp_app, serve_mcp
    from jarvis.entrypoints.mcp_server.sdk_server import streamable_http

    app, sessions = streamable_http(build(runtime, spec), max_body_bytes=spec.max_body_bytes)
    policy = ListenerPolicy.of(
        allowed_hosts=allowed_hosts, allowed_origins=allowed_origins, allowed_uids=allowed_uids
    )
    guarded = guarded_mcp_app(
        app, api_key=api_key, policy=policy, max_body_bytes=spec.max_body_bytes
    )

    @contextlib.asynccontextmanager
    async def lifetime() -> AsyncIterator[None]:
        try:
            async with sessions:
                yield
        finally:
            await runtime.aclose()

    serve_mcp(guarded, lifetime(), host=host, port=port, log_level="info" if verbose else "warning")
