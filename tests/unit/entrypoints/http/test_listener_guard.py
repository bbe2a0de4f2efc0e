"""The listener guard's own rules, over a real uvicorn server: the owner is a uid, not
"whoever is root"; and a system that cannot tell the connecting user needs a key."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.serve_access import check_owner_only
from jarvis.entrypoints.http import peer_user
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy
from jarvis.entrypoints.http.security import Receive, Scope, Send
from jarvis.entrypoints.http.server import ServerThread
from tests.support.socket_table import wait_until_let_go


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok", "more_body": False})


def test_only_the_owner_uid_is_served_root_included() -> None:
    """The server's owner is another uid: this process (root in CI, or any user) is
    refused; allowed by uid, it is served."""
    me = os.geteuid()
    stranger = ListenerGuard(_ok, ListenerPolicy(owner_only=True, owner_uid=me + 12345))
    allowed = ListenerGuard(
        _ok,
        ListenerPolicy(owner_only=True, owner_uid=me + 12345, allowed_uids=frozenset({me})),
    )
    with ServerThread(stranger) as address:
        refused = httpx.get(address.url + "/")
    with ServerThread(allowed) as address:
        served = httpx.get(address.url + "/")
    assert refused.status_code == 403
    assert f"uid {me}" in refused.json()["error"]["message"]
    assert served.status_code == 200


def test_a_keyless_server_does_not_start_where_the_user_cannot_be_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel without the socket-diagnostics interface (here: a netlink protocol no kernel
    has) cannot tell who connects."""
    check_owner_only(None)
    monkeypatch.setattr(peer_user, "NETLINK_SOCK_DIAG", 31)
    with pytest.raises(ConfigurationError, match="API key"):
        check_owner_only(None)
    check_owner_only("a-key-of-enough-length")


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:{port}", True),
        ("localhost:{port}", True),
        ("[::1]:{port}", True),
        ("127.0.0.1", False),
        ("127.0.0.1:{port}0", False),
        ("127.0.0.1:{port}:1", False),
        ("localhost.attacker.example:{port}", False),
        ("attacker.example:{port}", False),
        ("[::1", False),
        ("", False),
    ],
)
def test_host_names(host: str, served: bool) -> None:
    with ServerThread(ListenerGuard(_ok)) as address:
        reply = httpx.get(address.url + "/", headers={"host": host.format(port=address.port)})
    assert (reply.status_code == 200) is served, reply.text


def test_the_connecting_user_is_told_over_ipv6_too() -> None:
    """A server on ``::1`` (an IPv6 socket asked of the kernel): its owner is served, and the
    same connection is refused when the owner is another uid."""
    me = os.geteuid()
    for owner, status in ((me, 200), (me + 12345, 403)):
        guard = ListenerGuard(_ok, ListenerPolicy(owner_only=True, owner_uid=owner))
        try:
            thread = ServerThread(guard, host="::1")
            address = thread.__enter__()
        except RuntimeError:
            pytest.skip("no IPv6 loopback here")
        try:
            reply = httpx.get(f"http://[::1]:{address.port}/")
        finally:
            thread.__exit__(None, None, None)
        assert reply.status_code == status, reply.text


def test_each_connection_is_looked_up_alone_not_in_the_whole_socket_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """50 connections at once to a keyless server: each is served, and the socket table
    (``/proc/net/tcp``, read whole per connection before: 22 ms with 8,000 sockets open, on
    the event loop) is never read; each owner is asked of the kernel for its one socket."""
    read: list[str] = []
    real_open = Path.open

    def counting_open(path: Path, *args: Any, **kwargs: Any) -> IO[Any]:
        if str(path).startswith("/proc/net/tcp"):
            read.append(str(path))
        stream: IO[Any] = real_open(path, *args, **kwargs)
        return stream

    monkeypatch.setattr(Path, "open", counting_open)
    guard = ListenerGuard(_ok, ListenerPolicy(owner_only=True))
    with ServerThread(guard) as address:
        request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{address.port}\r\nConnection: close\r\n\r\n"
        connections = [socket.create_connection(("127.0.0.1", address.port)) for _ in range(50)]
        try:
            for connection in connections:
                connection.sendall(request.encode())
            replies = [_whole_reply(connection) for connection in connections]
        finally:
            for connection in connections:
                connection.close()
    assert [reply[:12] for reply in replies] == [b"HTTP/1.1 200"] * 50
    assert read == []


def _whole_reply(connection: socket.socket) -> bytes:
    connection.settimeout(30)
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_socket_its_client_closed_tells_no_owner() -> None:
    """Once its client closed it, a socket belongs to no process (a TIME_WAIT entry's uid
    reads 0, root's): no owner, so a server run by root does not take it for its own."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = listener.getsockname()
        client = socket.create_connection(server)
        accepted, _ = listener.accept()
        with accepted:
            local = client.getsockname()
            assert peer_user.peer_uid(local, server) == os.geteuid()
            client.close()
            assert accepted.recv(1) == b""  # its end arrived
            wait_until_let_go(local, server)
            assert peer_user.peer_uid(local, server) is None
