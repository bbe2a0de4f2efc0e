"""The trace goes on into MCP servers: a recorded tool call to a real MCP server (the
SDK's own server, over streamable HTTP and over stdio) carries ``_meta.traceparent``
(MCP SEP-414) naming the run's exported trace and that tool call's exported span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

pytestmark = pytest.mark.integration

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


@contextmanager
def mcp_server(tmp_path: Path, transport: str) -> Iterator[str]:
    """The ``[mcp.servers.ref]`` table of the reference server."""
    if transport == "stdio":
        yield f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(SERVER)}]\n"
        return
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port_file)], stdin=subprocess.DEVNULL
    )
    try:
        for _ in range(1200):
            if (port_file.exists() and port_file.read_text()) or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        yield f'url = "http://127.0.0.1:{port_file.read_text()}/mcp"\n'
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_an_mcp_tool_call_carries_the_traceparent_of_its_span(
    jarvis_home: Path, tmp_path: Path, transport: str
) -> None:
    call = tool_call("call_1", "ref_trace_context", {})
    with (
        mcp_server(tmp_path, transport) as table,
        ScriptedEngine([Reply(tool_calls=[call]), Reply("Done.")]) as engine,
    ):
        (jarvis_home / "config.toml").write_text(
            f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
            f'[engine.openai]\nbase_url = "{engine.url}"\n'
            f"[traces]\nenabled = true\n[mcp.servers.ref]\n{table}"
        )
        done = jarvis(
            "ask", "-a", "orchestrator", "--tools", "ref.trace_context", "--approve", "auto",
            "Trace?",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        [answer] = [m for m in engine.messages(1) if m["role"] == "tool"]
    sent = str(answer["content"])
    listed = jarvis("traces", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [trace] = json.loads(listed.stdout)
    exported = jarvis("traces", "export", str(trace["id"]))
    assert exported.returncode == 0, exported.stderr
    spans = json.loads(exported.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    [tool] = [s for s in spans if s["name"] == "execute_tool ref_trace_context"]
    assert sent == f"00-{tool['traceId']}-{tool['spanId']}-01"
