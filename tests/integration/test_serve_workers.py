"""``jarvis serve --workers N``: N processes on one port, sharing managed agents and
conversations through the session store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.stub_server import StubServer
from tests.support.serve_process import ServeProcess, start_serve, wait_until_healthy

pytestmark = pytest.mark.integration

STARTUP = 90.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(c) for c in (task / "children").read_text().split())
    return found


@dataclass(frozen=True, slots=True)
class _Child:
    """A child of the supervisor, with a pidfd opened while it surely existed: its pid may
    be another process's once it has ended and been reaped, its pidfd never is."""

    pid: int
    fd: int


def _hold(pids: list[int]) -> list[_Child]:
    held = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            held.append(_Child(pid, os.pidfd_open(pid)))
    return held


def _workers(children: list[_Child], expected: int) -> list[_Child]:
    """The worker processes among the supervisor's ``children`` (uvicorn's spawn start
    method puts a resource tracker beside them: the workers are the ones that listen)."""
    workers = []
    for child in children:
        cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()
        if b"resource_tracker" not in cmdline:
            workers.append(child)
    assert len(workers) == expected, workers
    return workers


def _two_workers(stub_server: StubServer, home: Path, *, stdout: int) -> ServeProcess:
    """``jarvis serve --workers 2`` on the stub engine, ``home`` its config folder."""
    engine = ("--engine", "openai", "--base-url", stub_server.url, "--model", "stub")
    return start_serve("--workers", "2", *engine, env={"OPENJARVIS_HOME": str(home)}, stdout=stdout)


def test_workers_share_managed_agents_and_conversations(
    stub_server: StubServer, tmp_path: Path
) -> None:
    served = _two_workers(stub_server, tmp_path, stdout=subprocess.PIPE)
    process, url = served.process, served.url
    children: list[_Child] = []
    try:
        deadline = time.monotonic() + STARTUP
        wait_until_healthy(served, timeout=STARTUP)
        # both workers up: each answers /health once it is listening
        while len(_children(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _hold(_children(process.pid))
        workers = _workers(children, 2)

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
        assert "Traceback" not in served.startup + process.stderr.read().decode()
        assert not any(_alive(worker) for worker in workers)
    finally:
        _end(process, children)


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
    assert done.returncode == 2, done.stderr
    assert "Could not listen" in done.stderr
    assert "serving on" not in done.stderr
    assert "Traceback" not in done.stderr


def _alive(child: _Child) -> bool:
    """``child`` runs (a zombie waiting for its reaper has ended; a reaped one is gone even
    when its pid is another process's now)."""
    try:
        signal.pidfd_send_signal(child.fd, 0)
        stat = Path(f"/proc/{child.pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_the_workers_end_with_a_killed_supervisor(stub_server: StubServer, tmp_path: Path) -> None:
    served = _two_workers(stub_server, tmp_path, stdout=subprocess.DEVNULL)
    process = served.process
    children: list[_Child] = []
    try:
        deadline = time.monotonic() + STARTUP
        wait_until_healthy(served, timeout=STARTUP)
        while len(_children(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _hold(_children(process.pid))
        workers = _workers(children, 2)

        process.kill()  # SIGKILL: the supervisor gets no chance to stop its workers
        process.wait(30)
        deadline = time.monotonic() + 60
        while any(_alive(w) for w in workers):  # then nothing serves the port: they held it
            assert time.monotonic() < deadline, [w for w in workers if _alive(w)]
            time.sleep(0.05)
    finally:
        _end(process, children)


def _end(process: subprocess.Popen[bytes], children: list[_Child]) -> None:
    """Kill what the test started, should it have outlived the test, through the pidfds."""
    if process.poll() is None:
        process.kill()
        process.wait()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(child.fd, signal.SIGKILL)
        os.close(child.fd)


def test_the_workers_write_their_last_traces_when_stopped(
    stub_server: StubServer, tmp_path: Path
) -> None:
    """Stopped by ``SIGTERM`` right after their answers, the workers write every trace of
    them first: each is ended by the signal uvicorn raises again, before Python's exit
    handlers, so the writer's last batch is written when the server's lifespan ends. (Without
    that, whether a trace is lost depends on when the writer last woke: this test saw it in
    some runs only; ``test_serve_lifespan.py`` checks each part of the mechanism.)"""
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.domain.traces import TraceQuery

    (tmp_path / "config.toml").write_text("[traces]\nenabled = true\n", encoding="utf-8")
    served = _two_workers(stub_server, tmp_path, stdout=subprocess.DEVNULL)
    process = served.process
    try:
        wait_until_healthy(served, timeout=STARTUP)
        asked = 20
        for _ in range(asked):  # a connection each: the workers share them as they accept
            reply = httpx.post(
                served.url + "/v1/chat/completions",
                json={"model": "jarvis/simple", "messages": [{"role": "user", "content": "hi"}]},
                timeout=60,
            )
            assert reply.status_code == 200, reply.text
        process.send_signal(signal.SIGTERM)  # at once: the writer's batch is still pending
        assert process.wait(60) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read().decode()
    finally:
        _end(process, [])
    kept = SqliteTraceStore(tmp_path / "traces.db").list(TraceQuery(limit=1000))
    assert len(kept) == asked
