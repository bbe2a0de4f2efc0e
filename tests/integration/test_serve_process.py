"""``jarvis serve`` as a real process: it listens, answers, refuses what it must, and stops
on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from bench.stub_server import StubServer
from tests.support.serve import API_KEY
from tests.support.serve_process import start_serve

pytestmark = pytest.mark.integration


@contextmanager
def _jarvis_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    served = start_serve(*args, env=env, stdout=subprocess.PIPE)
    process = served.process
    try:
        yield served.url
        process.send_signal(signal.SIGTERM)
        # a graceful shutdown, then uvicorn re-raises the signal it handled
        assert process.wait(30) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in served.startup + process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_jarvis_serve_answers_openai_clients_and_stops_on_sigterm(
    stub_server: StubServer,
) -> None:
    with _jarvis_serve(
        "--engine", "openai", "--base-url", stub_server.url, "--model", "stub"
    ) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="jarvis/simple", messages=[{"role": "user", "content": "hi"}]
        )
        created = httpx.post(url + "/v1/managed-agents", json={"id": "p"})
    assert reply.choices[0].message.content
    assert created.status_code == 201


def test_beyond_loopback_it_needs_a_key_and_then_asks_for_it(stub_server: StubServer) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "jarvis", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "JARVIS_API_KEY": ""},
    )
    assert refused.returncode == 2
    assert "without an API key" in refused.stderr
    assert "Traceback" not in refused.stderr
    with _jarvis_serve(
        "--host",
        "0.0.0.0",
        "--engine",
        "openai",
        "--base-url",
        stub_server.url,
        "--model",
        "stub",
        env={"JARVIS_API_KEY": API_KEY},
    ) as url:
        without = httpx.get(url + "/v1/models")
        with_key = httpx.get(url + "/v1/models", headers={"x-api-key": API_KEY})
    assert without.status_code == 401
    assert with_key.status_code == 200


@pytest.mark.parametrize("source", ["config", "variable"])
def test_openjarvis_s_key_is_required_beyond_loopback(
    stub_server: StubServer, jarvis_home: Path, source: str
) -> None:
    """OpenJarvis's ``[server.auth] api_key`` (in a private file) and ``OPENJARVIS_API_KEY``
    serve a config binding 0.0.0.0, as OpenJarvis's chat-simple example does."""
    config = jarvis_home / "config.toml"
    auth = f'[server.auth]\napi_key = "{API_KEY}"\n' if source == "config" else ""
    config.write_text(f'[server]\nhost = "0.0.0.0"\n{auth}', encoding="utf-8")
    config.chmod(0o600)
    env = {"OPENJARVIS_API_KEY": API_KEY} if source == "variable" else {}
    with _jarvis_serve(
        "--engine", "openai", "--base-url", stub_server.url, "--model", "stub", env=env
    ) as url:
        without = httpx.get(url + "/v1/models")
        with_key = httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert without.status_code == 401
    assert with_key.status_code == 200
    if source == "config":  # not from a file other users may read
        config.chmod(0o644)
        refused = subprocess.run(
            [sys.executable, "-m", "jarvis", "serve", "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 2
        assert "chmod 600" in refused.stderr
        assert API_KEY not in refused.stderr + refused.stdout


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    """Exit 2 with what to do (uvicorn alone exits 3, the code of an unreachable engine),
    and no line saying it serves."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "jarvis", "serve", "--port", str(port)],
            env={**os.environ, "OPENJARVIS_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    assert f"Could not listen on 127.0.0.1:{port}." in done.stderr
    assert "serving on" not in done.stderr
    assert "Traceback" not in done.stderr


def test_sigterm_right_after_an_answer_loses_no_trace_and_still_ends_by_the_signal(
    stub_server: StubServer, tmp_path: Path
) -> None:
    """uvicorn raises SIGTERM again once shut down; the default handler then killed the
    process before its exit handlers, and the trace writer's last batch (the runs of the
    last half second) was lost. Now the exit handlers run first, and the process still
    ends by the signal (what a service manager counts as a clean stop)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[traces]\nenabled = true\n", encoding="utf-8")
    served = start_serve(
        "--engine",
        "openai",
        "--base-url",
        stub_server.url,
        "--model",
        "stub",
        env={"OPENJARVIS_HOME": str(home)},
    )
    process = served.process
    try:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        for number in range(3):
            answer = client.chat.completions.create(
                model="jarvis/simple", messages=[{"role": "user", "content": f"q{number}"}]
            )
            assert answer.choices[0].message.content
        process.send_signal(signal.SIGTERM)  # at once: the writer's batch is not due yet
        assert process.wait(30) == -signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    listed = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "list", "--json"],
        env={**os.environ, "OPENJARVIS_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(json.loads(listed.stdout)) == 3
