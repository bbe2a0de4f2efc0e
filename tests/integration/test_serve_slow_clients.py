"""``jarvis serve`` against clients that open connections and never finish a request:
uvicorn alone would keep each one open for good (a descriptor of the server each), so
the server's protocol closes them once its header deadline has passed."""

from __future__ import annotations

import pickle
import socket
import time

import httpx
import pytest

from jarvis.entrypoints.http.protocol import HEADER_DEADLINE, JarvisHttpProtocol
from jarvis.entrypoints.http.server import uvicorn_options
from jarvis.testing import ScriptedInference
from tests.support.serve import Served, serving

pytestmark = pytest.mark.integration

DEADLINE = 0.5


def _half_requests(url: str, count: int) -> list[socket.socket]:
    port = int(url.rsplit(":", 1)[1])
    held = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port))
        connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        held.append(connection)
    return held


def _closed_by_server(connection: socket.socket, within: float) -> bool:
    connection.settimeout(max(0.01, within))
    try:
        return connection.recv(100) == b""
    except TimeoutError:
        return False
    except OSError:
        return True  # reset: closed too


def _complete(served: Served) -> int:
    body = {"model": "jarvis/simple", "messages": [{"role": "user", "content": "hi"}]}
    reply = httpx.post(served.url + "/v1/chat/completions", json=body, timeout=30)
    return reply.status_code


def test_every_served_process_closes_half_sent_requests_after_its_deadline() -> None:
    options = uvicorn_options("warning")
    assert options["http"] is JarvisHttpProtocol
    assert JarvisHttpProtocol.header_deadline == HEADER_DEADLINE == 10.0
    # --workers hands the protocol to other processes: it must survive pickling
    assert pickle.loads(pickle.dumps(JarvisHttpProtocol)) is JarvisHttpProtocol


def test_half_sent_requests_are_closed_and_requests_still_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(JarvisHttpProtocol, "header_deadline", DEADLINE)
    with serving(ScriptedInference(["Hello."])) as served:
        held = _half_requests(served.url, 200)
        try:
            deadline = time.monotonic() + 30
            closed = [_closed_by_server(c, deadline - time.monotonic()) for c in held]
            assert all(closed), f"{closed.count(False)} of {len(held)} still open"
            assert _complete(served) == 200
        finally:
            for connection in held:
                connection.close()


def test_a_slow_answer_is_not_cut_by_the_header_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JarvisHttpProtocol, "header_deadline", DEADLINE)
    with serving(ScriptedInference(["Slow."], latency=4 * DEADLINE)) as served:
        assert _complete(served) == 200


def test_an_idle_keep_alive_connection_serves_again_then_is_closed_after_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After an answer the connection's deadline starts again: a client may ask again on
    it meanwhile, and one that stays idle is closed (the only timer of an idle
    connection: uvicorn's own keep-alive timer is not armed)."""
    monkeypatch.setattr(JarvisHttpProtocol, "header_deadline", DEADLINE)
    with serving(ScriptedInference(["One.", "Two."])) as served:
        port = int(served.url.rsplit(":", 1)[1])
        body = b'{"model": "jarvis/simple", "messages": [{"role": "user", "content": "hi"}]}'
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % (port, len(body))
        ) + body
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            for answer in (b"One.", b"Two."):  # the same connection, answered twice
                connection.sendall(request)
                received = b""
                while answer not in received:
                    chunk = connection.recv(65536)
                    assert chunk, f"closed before the answer: {received!r}"
                    received += chunk
            assert _closed_by_server(connection, 30)
