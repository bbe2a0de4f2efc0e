"""``jarvis serve --workers N``: N processes on one port, sharing managed agents and
conversations through the session store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.stub_server import StubServer
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

STARTUP = 90.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(c) for c in (task / "children").read_text().split())
    return found


def _worker_pids(pid: int, expected: int) -> list[int]:
    """The worker processes under the supervisor (uvicorn's spawn start method puts a
    resource tracker beside them: the workers are the ones that listen)."""
    workers = []
    for child in _children(pid):
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"resource_tracker" not in cmdline:
            workers.append(child)
    assert len(workers) == expected, workers
    return workers


def test_workers_share_managed_agents_and_conversations(
    stub_server: StubServer, tmp_path: Path
) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jarvis",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--engine",
            "openai",
            "--base-url",
            stub_server.url,
            "--model",
            "stub",
        ],
        env={**os.environ, "OPENJARVIS_HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "jarvis serve did not start"
            time.sleep(0.05)
        # both workers up: each answers /health once it is listening
        while len(_children(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _worker_pids(process.pid, 2)

        created = httpx.post(url + "/v1/managed-agents", json={"id": "shared"})
        assert created.status_code == 201
        for _ in range(3):  # fresh connections: whichever worker accepts them
            sent = httpx.post(
                url + "/v1/managed-agents/shared/messages",
                json={"content": "What is the capital of France?", "stream": False},
            )
            assert sent.status_code in (200, 201, 202), sent.text
            ran = httpx.post(url + "/v1/managed-agents/shared/run", timeout=60)
            assert ran.status_code == 200, ran.text
        for _ in range(20):
            listed = httpx.get(url + "/v1/managed-agents/shared/messages")
            assert listed.status_code == 200
            roles = [m["role"] for m in listed.json()["data"]]
            assert roles.count("user") == 3, roles
            assert roles.count("assistant") == 3, roles

        process.send_signal(signal.SIGTERM)
        assert process.wait(60) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read().decode()
        for worker in workers:
            assert not Path(f"/proc/{worker}").exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_port_in_use_is_a_clear_error_with_workers(tmp_path: Path) -> None:
    with __import__("socket").socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "jarvis", "serve", "--port", str(port), "--workers", "2"],
            env={**os.environ, "OPENJARVIS_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    assert "Could not listen" in done.stderr
    assert "Traceback" not in done.stderr


def _alive(pid: int) -> bool:
    """A process that runs (a zombie waiting for its reaper has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_the_workers_end_with_a_killed_supervisor(stub_server: StubServer, tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jarvis",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--engine",
            "openai",
            "--base-url",
            stub_server.url,
            "--model",
            "stub",
        ],
        env={**os.environ, "OPENJARVIS_HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    children: list[int] = []
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "jarvis serve did not start"
            time.sleep(0.05)
        while len(_children(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _children(process.pid)
        workers = _worker_pids(process.pid, 2)

        process.kill()  # SIGKILL: the supervisor gets no chance to stop its workers
        process.wait(30)
        deadline = time.monotonic() + 60
        while any(_alive(w) for w in workers) or _listening(port):
            assert time.monotonic() < deadline, [w for w in workers if _alive(w)]
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for child in children:  # what this test started, should it have outlived the test
            if _alive(child):
                os.kill(child, signal.SIGKILL)
