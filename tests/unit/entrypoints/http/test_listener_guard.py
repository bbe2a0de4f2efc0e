"""The listener guard's own rules, over a real uvicorn server: the owner is a uid, not
"whoever is root"; and a system that cannot tell the connecting user needs a key."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.serve_access import check_owner_only
from jarvis.entrypoints.http import peer_user
from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy
from jarvis.entrypoints.http.security import Receive, Scope, Send
from jarvis.entrypoints.http.server import ServerThread


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
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(peer_user, "TABLES", (tmp_path / "tcp", tmp_path / "tcp6"))
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
    """``/proc/net/tcp6`` is read for a server on ``::1``: its owner is served, and the
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
