"""``jarvis mcp serve`` driven by the ``mcp`` SDK's own client, for the tests: over stdio
(the SDK spawns the command) or streamable HTTP (a process of its own, on a free port)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.serve_process import stop_serve

JARVIS = [sys.executable, "-m", "jarvis"]
STARTUP_SECONDS = 60.0
"""A backstop only: the server says where it listens as soon as it does."""


def engine_options(url: str, model: str) -> tuple[str, ...]:
    return ("--engine", "openai", "--base-url", url, "--model", model)


@asynccontextmanager
async def stdio_session(*args: str) -> AsyncIterator[ClientSession]:
    """A session with ``jarvis mcp serve ARGS...`` over stdio (this process's environment:
    the test's ``OPENJARVIS_HOME``), initialized."""
    params = StdioServerParameters(
        command=JARVIS[0], args=[*JARVIS[1:], "mcp", "serve", *args], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@dataclass(frozen=True, slots=True)
class HttpServer:
    url: str
    """``http://127.0.0.1:PORT/mcp``."""
    process: subprocess.Popen[bytes]


@contextmanager
def http_server(*args: str, env: Mapping[str, str] | None = None) -> Iterator[HttpServer]:
    """``jarvis mcp serve --http --port 0 ARGS...`` until the block ends (SIGTERM)."""
    process = subprocess.Popen(
        [*JARVIS, "mcp", "serve", "--http", "--port", "0", *args],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        seen = b""
        while True:  # the line naming the port (or the process's end)
            line = process.stderr.readline()
            if not line:
                raise AssertionError("jarvis mcp serve --http ended: " + seen.decode())
            seen += line
            found = re.search(rb"serving MCP on (http://\S+)", line)
            if found:
                yield HttpServer(found.group(1).decode(), process)
                break
    finally:
        stop_serve(process)
        if process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def http_session(
    url: str, headers: Mapping[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session with the server at ``url`` (streamable HTTP)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(headers or {}) or None) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))
