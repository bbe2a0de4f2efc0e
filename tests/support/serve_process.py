"""``jarvis serve`` as a real process on a free loopback port, and curl run as any user.

The attack suites talk to the server as an outsider would: over TCP, with headers of their
choosing, from another local user's process (``curl`` run with that user's uid).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import httpx
import pytest

STARTUP = 60.0
_SERVING = re.compile(rb"jarvis: serving on (http://\S+)")


@dataclass(frozen=True, slots=True)
class ServeProcess:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    startup: str
    """What the server wrote on stderr up to the line saying where it serves (the rest is
    left in ``process.stderr``)."""


def start_serve(
    *args: str, env: dict[str, str] | None = None, stdout: int = subprocess.DEVNULL
) -> ServeProcess:
    """``jarvis serve --port 0 ARGS...`` once it listens: the URL is the one it says it
    serves on. The system picks the port as the server binds it, so no other process can
    take it between a probe and the bind, and no other server answers in its place."""
    process = subprocess.Popen(
        [sys.executable, "-m", "jarvis", "serve", "--port", "0", *args],
        env={**os.environ, **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: queue.Queue[bytes] = queue.Queue()

    def read(stream: IO[bytes]) -> None:  # up to the announcement, or the end
        for line in iter(stream.readline, b""):
            lines.put(line)
            if _SERVING.search(line):
                return
        lines.put(b"")

    threading.Thread(target=read, args=(process.stderr,), daemon=True).start()
    seen: list[bytes] = []
    deadline = time.monotonic() + STARTUP
    try:
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise AssertionError("jarvis serve did not start") from None
            if not line:
                process.wait(30)
                raise AssertionError(b"".join(seen).decode(errors="replace"))
            seen.append(line)
            found = _SERVING.search(line)
            if found:
                port = int(found.group(1).decode().rsplit(":", 1)[1])
                url = f"http://127.0.0.1:{port}"  # bound to 0.0.0.0 too: reached on loopback
                return ServeProcess(url, port, process, b"".join(seen).decode(errors="replace"))
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise


def stop_serve(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL past 30 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def jarvis_serve(
    *args: str, env: dict[str, str] | None = None, key: str | None = None
) -> Iterator[ServeProcess]:
    """``jarvis serve --port 0 ARGS...``, once it listens (:func:`start_serve`) and answers
    ``/health`` (``key``: the API key it was given)."""
    served = start_serve(*args, env=env)
    try:
        wait_until_healthy(served, key=key)
        yield served
    finally:
        stop_serve(served.process)


def wait_until_healthy(
    served: ServeProcess, *, key: str | None = None, timeout: float = STARTUP
) -> None:
    """Until ``/health`` answers 200: with ``--workers``, the supervisor listens (and says
    so) before a worker has started to answer. A server that ends meanwhile fails the wait
    with what it wrote."""
    headers = {"x-api-key": key} if key else {}
    deadline = time.monotonic() + timeout
    while True:
        if served.process.poll() is not None:
            rest = served.process.stderr.read().decode() if served.process.stderr else ""
            raise AssertionError(served.startup + rest)
        try:
            health = httpx.get(served.url + "/health", headers=headers, timeout=5)
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "no worker of jarvis serve answered"
            time.sleep(0.05)
    assert health.status_code == 200, health.text


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
