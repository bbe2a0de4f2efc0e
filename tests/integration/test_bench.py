"""The benchmark tools keep working (their figures are not asserted: benchmarks are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.common import ROOT, bytecode_env
from bench.stub_server import ANSWER, StubServer

pytestmark = pytest.mark.integration

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate arithmetic.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


def test_stub_answers_plain_questions(stub_server: StubServer) -> None:
    messages = [{"role": "user", "content": "q"}]
    with httpx.Client(base_url=stub_server.url) as client:
        assert client.get("/models").json()["data"][0]["id"] == "stub-model"
        body = client.post("/chat/completions", json={"model": "m", "messages": messages}).json()
        assert body["choices"][0]["message"]["content"] == ANSWER
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["total_tokens"] > 0
        with client.stream(
            "POST", "/chat/completions", json={"model": "m", "messages": messages, "stream": True}
        ) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == ANSWER
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_stub_calls_the_first_tool_once(stub_server: StubServer) -> None:
    first = [{"role": "user", "content": "2+2?"}]
    with httpx.Client(base_url=stub_server.url) as client:
        body = client.post(
            "/chat/completions", json={"model": "m", "messages": first, "tools": TOOLS}
        ).json()
        call = body["choices"][0]["message"]["tool_calls"][0]
        assert body["choices"][0]["finish_reason"] == "tool_calls"
        assert call["function"]["name"] == "calculator"
        assert json.loads(call["function"]["arguments"]) == {"expression": "2+2"}
        second = [
            *first,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "4"},
        ]
        body = client.post(
            "/chat/completions", json={"model": "m", "messages": second, "tools": TOOLS}
        ).json()
    assert body["choices"][0]["message"]["content"] == ANSWER


@pytest.mark.slow
@pytest.mark.timeout(900)  # every benchmark once, quick: bounded work, slow on busy cores
def test_runner_quick_mode(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=840,  # within the backstop above
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    names = {row["name"] for row in json.loads(out.read_text())}
    assert {
        "framework overhead per simple turn",
        "50 concurrent runs, Jarvis.aask",
        "jarvis --help",
        "jarvis ask, end to end (stub)",
        "jarvis ask, end to end (stub), vs a bare httpx.post process",
        "50 concurrent two-call tool runs",
        "import jarvis",
        "peak RSS of jarvis ask",
        "CPU per two-call tool run, jarvis on httptools",
        "jarvis ask, end to end (stub), on httptools",
    } <= names
    assert "| benchmark |" in result.stdout


def test_measured_processes_run_from_bytecode_kept_outside_the_tree(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "measured_module.py").write_text("VALUE = 1\n", encoding="utf-8")
    cache = tmp_path / "bytecode"
    env = bytecode_env({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}, cache)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    subprocess.run(
        [sys.executable, "-c", "import measured_module"], cwd=source, env=env, check=True
    )
    assert list(cache.rglob("measured_module.*.pyc"))  # written, for the next run to load
    assert not (source / "__pycache__").exists()  # and not into the source tree
