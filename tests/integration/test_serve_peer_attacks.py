"""The keyless server's check of the connecting user, attacked by another local user the
test creates: a request sent and its connection closed at once, so that the server looks
the socket up after its client let go of it (the kernel then lists it as root's). Against a
real uvicorn server that waits for the test before it looks."""

from __future__ import annotations

import asyncio
import queue
import shutil
import subprocess
import threading

import pytest

from jarvis.entrypoints.http.listener_guard import ListenerGuard, ListenerPolicy
from jarvis.entrypoints.http.security import Receive, Scope, Send
from jarvis.entrypoints.http.server import ServerThread
from tests.support.socket_table import wait_until_let_go
from tests.support.users import throwaway_user

pytestmark = pytest.mark.integration

WAIT = 60.0


class _Held:
    """The guarded application behind a gate: each request waits for :attr:`go` before the
    guard looks at it; what reaches the application is noted in :attr:`reached`."""

    def __init__(self) -> None:
        self.arrived: queue.Queue[tuple[str, int]] = queue.Queue()
        self.go = threading.Event()
        self.done = threading.Event()
        self.reached: list[str] = []
        self.guard = ListenerGuard(self._app, ListenerPolicy(owner_only=True))

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.reached.append(str(scope["path"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        client = scope["client"]
        self.arrived.put((str(client[0]), int(client[1])))
        await asyncio.to_thread(self.go.wait, WAIT)
        try:
            await self.guard(scope, receive, send)
        finally:
            self.done.set()


def test_another_user_s_closed_connection_is_not_taken_for_root_s() -> None:
    """The server runs as root (the tests do) without a key; another user sends a request
    that would create something, and closes at once. Looked up after the close, the socket
    is a TIME_WAIT entry whose uid reads 0: it must not pass for the owner's."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    held = _Held()
    with throwaway_user("jsp") as (uid, gid), ServerThread(held) as address:
        server = ("127.0.0.1", address.port)
        request = (
            f"POST /v1/managed-agents HTTP/1.1\\r\\nHost: 127.0.0.1:{address.port}\\r\\n"
            "Content-Length: 0\\r\\n\\r\\n"
        )
        script = f"exec 3<>/dev/tcp/127.0.0.1/{address.port} && printf '{request}' >&3 && exec 3>&-"
        subprocess.run(
            [bash, "-c", script], user=uid, group=gid, extra_groups=[], check=True, timeout=WAIT
        )
        client = held.arrived.get(timeout=WAIT)
        wait_until_let_go(client, server)
        held.go.set()
        assert held.done.wait(WAIT)
    assert held.reached == []
