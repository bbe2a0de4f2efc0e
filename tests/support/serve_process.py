"""``jarvis serve`` as a real process on a free loopback port, and curl run as any user.

The attack suites talk to the server as an outsider would: over TCP, with headers of their
choosing, from another local user's process (``curl`` run with that user's uid).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from tests.support.ports import free_port

STARTUP = 60.0


@dataclass(frozen=True, slots=True)
class ServeProcess:
    url: str
    port: int
    process: subprocess.Popen[bytes]


@contextmanager
def jarvis_serve(
    *args: str, env: dict[str, str] | None = None, key: str | None = None
) -> Iterator[ServeProcess]:
    """``jarvis serve --port FREE ARGS...``, once it answers ``/health`` (``key``: the API
    key it was given, for the readiness probe)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "jarvis", "serve", "--port", str(port), *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    headers = {"x-api-key": key} if key else {}
    try:
        deadline = time.monotonic() + STARTUP
        while True:  # until it listens (or dies)
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            try:
                if httpx.get(url + "/health", headers=headers, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("jarvis serve did not start")
            time.sleep(0.05)
        yield ServeProcess(url, port, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass(frozen=True, slots=True)
class CurlReply:
    status: int
    body: str

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


def curl_as(
    uid: int | None,
    gid: int | None,
    url: str,
    *,
    method: str = "GET",
    body: object | None = None,
    headers: dict[str, str] | None = None,
) -> CurlReply:
    """One request with ``curl`` in a process of ``uid``/``gid`` (``None``: this one's)."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    command = [curl, "-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}", "--max-time", "30"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    if body is not None:
        command += ["-H", "content-type: application/json", "--data-binary", json.dumps(body)]
    done = subprocess.run(
        [*command, url],
        capture_output=True,
        check=True,
        timeout=60,
        user=uid,
        group=gid,
        extra_groups=[] if uid is not None else None,
        cwd="/",
    )
    text, _, status = done.stdout.decode().rpartition("\n")
    return CurlReply(int(status), text)
