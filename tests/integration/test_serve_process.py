"""``jarvis serve`` as a real process: it listens, answers, refuses what it must, and stops
on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from bench.stub_server import StubServer
from tests.support.ports import free_port
from tests.support.serve import API_KEY

pytestmark = pytest.mark.integration

STARTUP = 60.0


@contextmanager
def _jarvis_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "jarvis", "serve", "--port", str(port), *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP
        while True:  # until it listens (or dies)
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("jarvis serve did not start")
            time.sleep(0.05)
        yield url
        process.send_signal(signal.SIGTERM)
        # a graceful shutdown, then uvicorn re-raises the signal it handled
        assert process.wait(30) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read().decode()
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
