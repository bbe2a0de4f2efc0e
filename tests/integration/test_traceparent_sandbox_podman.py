"""A caller's W3C ``traceparent`` through a real ``jarvis serve`` process into a sandboxed
run in a real Podman container: the run continues the caller's trace, and the inner agent's
inferences (brokered to the host over the container's stdio) are spans of that trace under
the sandboxed run, in what an OTLP/HTTP receiver gets and in the local store. The tool the
inner agent runs inside the container is not a span (nothing inside records or exports)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.podman_service import PodmanService, require_podman, running_podman_service
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.serve_process import jarvis_serve

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def podman() -> Iterator[PodmanService]:
    require_podman()
    with running_podman_service() as service:
        runtime = DockerContainerRuntime(ContainerSettings(runtime="podman", socket=service.url))
        try:
            asyncio.run(runtime.ensure_image())  # built once, before the server waits on it
        finally:
            runtime.close()
        yield service


def _spans_of(receiver: OtlpReceiver, trace_id: str, count: int) -> list[dict[str, object]]:
    """The spans of ``trace_id``, once ``count`` arrived (the writer exports in batches)."""
    deadline = time.monotonic() + 120
    while True:
        mine = [s for s in receiver.spans() if s["traceId"] == trace_id]
        if len(mine) >= count:
            return mine
        assert time.monotonic() < deadline, receiver.spans()
        time.sleep(0.05)


def _streamed_text(body: bytes) -> str:
    """The answer's text from the stream's OpenAI chunks."""
    text = []
    lines = body.decode().splitlines()
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]", lines[-3:]
    for line in lines:
        if line.startswith("data: {"):
            for choice in json.loads(line.removeprefix("data: ")).get("choices", ()):
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def test_a_served_sandboxed_run_continues_the_callers_trace(
    podman: PodmanService, jarvis_home: Path
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    replies = [
        Reply(tool_calls=[tool_call("call_1", "calculator", {"expression": "6*7"})]),
        Reply("It is 42."),
    ]
    with OtlpReceiver() as receiver, ScriptedEngine(replies) as engine:
        (jarvis_home / "config.toml").write_text(
            f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
            f'[engine.openai]\nbase_url = "{engine.url}"\n'
            f'[sandbox]\nruntime = "podman"\nsocket = "{podman.url}"\n'
            f'[traces]\nenabled = true\n[otel]\nendpoint = "{receiver.endpoint}"\n'
        )
        with jarvis_serve() as served:
            created = httpx.post(
                served.url + "/v1/managed-agents",
                json={
                    "id": "boxed",
                    "agent": "sandboxed",
                    "tools": ["calculator"],
                    "agent_options": {"inner": "orchestrator"},
                },
                timeout=30,
            )
            assert created.status_code == 201, created.text
            with httpx.stream(
                "POST",
                served.url + "/v1/managed-agents/boxed/messages",
                json={"content": "What is 6*7?", "stream": True},
                headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
                timeout=600,
            ) as stream:
                assert stream.status_code == 200
                body = b"".join(stream.iter_bytes())
            assert _streamed_text(body) == "It is 42.", body
            spans = _spans_of(receiver, trace_id, 3)
        assert len(engine.requests) == 2  # both inferences reached the host's engine
    [run] = [s for s in spans if str(s["name"]).startswith("invoke_agent")]
    assert run["parentSpanId"] == parent_id  # the sandboxed run hangs under the caller
    inferences = [s for s in spans if s is not run]
    assert len(inferences) == 2, spans
    assert all(s["parentSpanId"] == run["spanId"] for s in inferences)
    assert not [s for s in spans if str(s["name"]).startswith("execute_tool")]

    listed = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "list", "--json", "--limit", "5"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    [kept] = json.loads(listed.stdout)
    assert kept["agent"] == "sandboxed"
    assert kept["continues"] == {"trace_id": trace_id, "parent_span_id": parent_id}
