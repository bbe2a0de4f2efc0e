"""``jarvis serve`` against request heads (request line and headers) without end, sent over
raw sockets to a real ``jarvis serve`` process before any API key is checked: a header line
after another forever, one header of megabytes, more headers than a request needs, a URL of
megabytes. Each is answered (431 or 414) and closed once past its bound, the server's memory
does not grow with what is sent, and ordinary requests around them are served."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.stub_server import StubServer
from jarvis.entrypoints.http.protocol import MAX_HEAD_BYTES, MAX_HEADERS, MAX_TARGET_BYTES
from tests.support.serve_process import (
    ServeProcess,
    jarvis_serve,
    start_serve,
    wait_until_healthy,
)

pytestmark = pytest.mark.integration

FLOOD_CAP = 32 * 1024 * 1024
"""What the flooding client sends at most: far past the bound and past what the two ends'
socket buffers take in (a 4 MiB send buffer here) once the server stops reading, far below
what it took to grow the server to gigabytes."""


@pytest.fixture(scope="module")
def served(stub_server: StubServer) -> Iterator[ServeProcess]:
    engine = ("--engine", "openai", "--base-url", stub_server.url, "--model", "stub")
    with jarvis_serve(*engine) as server:
        yield server


def _peak_rss_kib(served: ServeProcess) -> int:
    for line in Path(f"/proc/{served.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/PID/status")


def _read_reply(connection: socket.socket) -> bytes:
    """Everything the server writes until it closes (a reset after its answer included)."""
    connection.settimeout(60)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = connection.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _flood(served: ServeProcess, head: bytes, line: bytes) -> tuple[bytes, int]:
    """``head``, then ``line`` again and again (up to :data:`FLOOD_CAP` bytes) while the
    reply is read: the reply, and how many bytes the server let the client send."""
    connection = socket.create_connection(("127.0.0.1", served.port))
    sent = 0

    def send() -> None:
        nonlocal sent
        chunk = line * max(1, 8192 // len(line))
        try:
            connection.sendall(head)
            sent += len(head)
            while sent < FLOOD_CAP:
                connection.sendall(chunk)
                sent += len(chunk)
        except OSError:  # the server closed the connection: what the test wants
            return

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        reply = _read_reply(connection)
        sender.join(60)
    finally:
        connection.close()
    return reply, sent


def _request(served: ServeProcess, target: str, *headers: str) -> tuple[int, bytes]:
    """One request with exactly ``headers`` (``Host`` first): its status and whole reply."""
    lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{served.port}", *headers]
    raw = ("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode("latin-1")
    with socket.create_connection(("127.0.0.1", served.port)) as connection:
        connection.sendall(raw)
        reply = _read_reply(connection)
    return _status(reply), reply


def _status(reply: bytes) -> int:
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    return int(reply[9:12])


def _healthy(served: ServeProcess) -> bool:
    return httpx.get(served.url + "/health", timeout=30).status_code == 200


def test_header_lines_without_end_are_answered_431_and_closed(served: ServeProcess) -> None:
    """The reproduction: ``x-a: b`` after ``x-a: b`` forever, unauthenticated. The server
    answers 431 and closes; the client could not push the whole flood into it, and the
    server's peak memory did not follow what was sent."""
    before = _peak_rss_kib(served)
    head = f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n".encode()
    reply, sent = _flood(served, head, b"x-a: b\r\n")
    grown = _peak_rss_kib(served) - before
    assert _status(reply) == 431, reply[:300]
    assert b'"code":"headers_too_large"' in reply.replace(b" ", b"")
    assert b"connection: close" in reply.lower()
    assert sent < FLOOD_CAP
    assert grown < 16 * 1024, f"peak RSS grew by {grown} KiB"
    assert _healthy(served)


def test_one_header_of_megabytes_is_answered_431(served: ServeProcess) -> None:
    """A ``traceparent`` whose value never ends (105 MB peaked at 314 MB before)."""
    before = _peak_rss_kib(served)
    head = f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\ntraceparent: ".encode()
    reply, sent = _flood(served, head, b"0" * 4096)
    grown = _peak_rss_kib(served) - before
    assert _status(reply) == 431, reply[:300]
    assert sent < FLOOD_CAP
    assert grown < 16 * 1024, f"peak RSS grew by {grown} KiB"
    assert _healthy(served)


def test_a_url_without_end_is_answered_414(served: ServeProcess) -> None:
    reply, sent = _flood(served, b"GET /v1/models?q=", b"a" * 4096)
    assert _status(reply) == 414, reply[:300]
    assert b'"code":"url_too_long"' in reply.replace(b" ", b"")
    assert sent < FLOOD_CAP
    assert _healthy(served)


def test_the_bounds_themselves(served: ServeProcess) -> None:
    """Exactly :data:`MAX_HEADERS` headers, a target of :data:`MAX_TARGET_BYTES` bytes and
    a head of :data:`MAX_HEAD_BYTES` bytes are served; one more header, one more byte of
    target or of head are not."""
    many = [f"x-h-{i}: {i}" for i in range(MAX_HEADERS - 2)]  # + Host + Connection
    target = "/v1/models?q="
    long_target = target + "a" * (MAX_TARGET_BYTES - len(target))
    base = len(f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n")
    base += len("Connection: close\r\n\r\n") + len("x-big: \r\n")
    fill = MAX_HEAD_BYTES - base

    assert _request(served, "/v1/models", *many)[0] == 200
    assert _request(served, "/v1/models", *many, "x-one: more")[0] == 431
    assert _request(served, long_target)[0] == 200
    assert _request(served, long_target + "a")[0] == 414
    assert _request(served, "/v1/models", "x-big: " + "b" * fill)[0] == 200
    assert _request(served, "/v1/models", "x-big: " + "b" * (fill + 1))[0] == 431


def test_each_request_of_a_kept_alive_connection_has_its_own_bound(
    served: ServeProcess,
) -> None:
    """Three requests on one connection, each with 40 KiB of headers (120 KiB together):
    all three are served."""
    head = (
        f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
        f"x-big: {'c' * 40 * 1024}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", served.port)) as c:
        c.settimeout(60)
        statuses = []
        for _ in range(3):
            c.sendall(head)
            statuses.append(_status(_one_response(c)))
    assert statuses == [200, 200, 200]


def _one_response(connection: socket.socket) -> bytes:
    """One response of a kept-alive connection (its head and its ``content-length`` body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = connection.recv(65536)
        assert chunk
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_refusal_of_a_bound_is_logged_as_itself_and_garbage_as_uvicorn_says(
    stub_server: StubServer,
) -> None:
    """A request stopped at a bound is answered with its reason, and the log does not call
    it invalid HTTP (``--verbose`` shows what was refused); a request that is not HTTP at
    all is still logged as uvicorn logs it."""
    engine = ("--engine", "openai", "--base-url", stub_server.url, "--model", "stub")
    served = start_serve(*engine)
    try:
        wait_until_healthy(served)
        too_many = [f"x-h{i}: v" for i in range(MAX_HEADERS + 1)]
        assert _request(served, "/v1/models", *too_many)[0] == 431
        assert _request(served, "/" + "a" * (MAX_TARGET_BYTES + 1))[0] == 414
        with socket.create_connection(("127.0.0.1", served.port)) as connection:
            connection.sendall(b"\x00\x01 not http at all\r\n\r\n")
            assert _status(_read_reply(connection)) == 400
    finally:
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(60)
    assert served.process.stderr is not None
    logged = served.process.stderr.read().decode()
    assert logged.count("Invalid HTTP request received.") == 1, logged  # the garbage only
    assert "Traceback" not in logged
