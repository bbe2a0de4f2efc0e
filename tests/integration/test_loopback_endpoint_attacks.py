"""jarvis's loopback Anthropic endpoint (the ``claude_code`` runner's) against another local
user: any user can reach a loopback port, so what it can do without the key is bounded."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import AsyncIterator

import pytest

from jarvis.entrypoints.composition.loopback import loopback_endpoint
from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint
from jarvis.testing import ScriptedInference

pytestmark = pytest.mark.integration

DEADLINE = 0.5


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[LoopbackEndpoint, str, str]]:
    served = loopback_endpoint(header_deadline=DEADLINE)
    url, key = await served.start(ScriptedInference(["Held."], latency=3 * DEADLINE), "m")
    try:
        yield served, url, key
    finally:
        await served.aclose()


def _half_requests(url: str, count: int) -> list[socket.socket]:
    """``count`` connections, each with a request line and one header, never finished."""
    port = int(url.rsplit(":", 1)[1])
    held = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port))
        connection.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n")
        held.append(connection)
    return held


def _closed_by_server(connection: socket.socket, within: float) -> bool:
    connection.settimeout(within)
    try:
        return connection.recv(100) == b""
    except TimeoutError:
        return False
    except OSError:
        return True  # reset: closed too


def _ask(url: str, key: str) -> int:
    body = json.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    ).encode()
    request = urllib.request.Request(
        url + "/v1/messages",
        data=body,
        headers={"x-api-key": key, "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return int(reply.status)


async def test_connections_that_never_finish_their_headers_are_closed(
    endpoint: tuple[LoopbackEndpoint, str, str],
) -> None:
    """300 half-sent requests (each a descriptor of the jarvis process, held for good
    before): all closed by the server once the deadline passed, and the runner's own
    request is still served."""
    _, url, key = endpoint
    held = await asyncio.to_thread(_half_requests, url, 300)
    deadline = time.monotonic() + 30
    try:
        closed = [
            await asyncio.to_thread(_closed_by_server, c, max(0.01, deadline - time.monotonic()))
            for c in held
        ]
    finally:
        for connection in held:
            connection.close()
    assert all(closed), closed.count(False)
    assert await asyncio.to_thread(_ask, url, key) == 200


async def test_a_request_served_longer_than_the_deadline_is_not_cut(
    endpoint: tuple[LoopbackEndpoint, str, str],
) -> None:
    """The deadline bounds the header phase only: an engine answering in three times the
    deadline still answers."""
    _, url, key = endpoint
    assert await asyncio.to_thread(_ask, url, key) == 200
