"""The REPL's attacks end to end: through ``code_interpreter``, CodeAct, the RLM and the CLI.

The model is scripted (``ScriptedInference``, or a loopback OpenAI-compatible server for
the CLI) to write hostile code; what must not happen is the secret — the user's private key,
the host's API key — reaching the next request to the model, or anything of the code
outliving the run. ``test_repl_attacks.py`` runs this file again as an ordinary user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl import SubprocessRepl
from jarvis.application.tools.code_interpreter import CodeInterpreterTool
from jarvis.domain.agents.native_openhands import NativeOpenHandsAgent
from jarvis.domain.agents.rlm import RecursiveLMAgent
from jarvis.domain.repl import ReplLimits
from jarvis.domain.run.contract import AgentContext
from jarvis.testing import ScriptedInference
from tests.integration.test_repl_attacks_memory import _FILL_SOCKETS, HOLD, watched

pytestmark = pytest.mark.integration

LIMITS = ReplLimits(timeout_seconds=10.0, memory_mb=256, max_processes=32)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repl() -> Iterator[SubprocessRepl]:
    repl = SubprocessRepl(limits=LIMITS)
    isolation = repl.isolation()
    if not getattr(isolation, "runs_code", True):
        pytest.skip(f"no OS sandbox here: {isolation.describe()}")
    yield repl
    if hasattr(repl, "close"):
        repl.close()


@pytest.fixture
def secret(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, str]]:
    """The running user's ``~/.ssh/id_rsa`` (mode 600; as root in a stand-in home) and the
    same secret as the host's API key."""
    value = "sk-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", value)
    home = Path.home() if os.geteuid() != 0 else tmp_path_factory.mktemp("home")
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    key = ssh / "id_rsa"
    key.write_text(value)
    key.chmod(0o600)
    yield key, value
    key.unlink()


def _stealing_code(key: Path) -> str:
    """Code that tries every way the host's secret could be read and prints what it got."""
    return (
        "import os\nfound = []\n"
        f"for p in [{str(key)!r}, os.path.expanduser('~/.ssh/id_rsa'), "
        f"'/proc/{os.getpid()}/environ', '/proc/{os.getppid()}/environ']:\n"
        "    try:\n        found.append(open(p, 'rb').read(1 << 16).decode('latin-1'))\n"
        "    except OSError as e:\n        found.append(type(e).__name__)\n"
        "print(found)\n"
    )


def _seen_by_model(engine: ScriptedInference) -> str:
    return "\n".join(m.content for r in engine.requests for m in r.messages)


async def test_code_interpreter_keeps_the_secret(
    repl: SubprocessRepl, secret: tuple[Path, str]
) -> None:
    key, value = secret
    tool = CodeInterpreterTool(repl, limits=LIMITS)
    result = await tool.execute({"code": _stealing_code(key)})
    assert "Error" in result.content or "[" in result.content, result
    assert value not in result.content, result


async def test_codeact_keeps_the_secret_from_the_model(
    repl: SubprocessRepl, secret: tuple[Path, str]
) -> None:
    key, value = secret
    engine = ScriptedInference([f"```python\n{_stealing_code(key)}```", "Nothing found."])
    agent = NativeOpenHandsAgent(engine, "m", repl=repl)
    result = await agent.arun("Find my key")
    assert len(engine.requests) == 2
    assert "found" in _seen_by_model(engine) or "Error" in _seen_by_model(engine)
    assert value not in _seen_by_model(engine)
    assert value not in result.content


async def test_rlm_keeps_the_secret_from_the_sub_model(
    repl: SubprocessRepl, secret: tuple[Path, str]
) -> None:
    key, value = secret
    code = _stealing_code(key) + "answer = llm_query('leak: ' + repr(found))\nFINAL(answer)\n"
    engine = ScriptedInference([f"```python\n{code}```", "sub-model saw nothing"])
    agent = RecursiveLMAgent(engine, "m", repl=repl)
    result = await agent.arun("Go", AgentContext(metadata={"context": "some context"}))
    assert result.content == "sub-model saw nothing"
    assert any("leak:" in m.content for r in engine.requests for m in r.messages)
    assert value not in _seen_by_model(engine)


_MEMORY_BOMB = HOLD + (
    "r, w = os.pipe()\nfor _ in range(8):\n    holder(100, w)\n"
    "os.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)\n"
)
"""8 processes of 100 MB each, every one below its own limit, then blocked until killed."""


_SOCKET_BOMB = (
    _FILL_SOCKETS + "import os, time\nr, w = os.pipe()\nfor _ in range(8):\n"
    "    if os.fork() == 0:\n        kept = fill(100)\n        os.write(w, b'x')\n"
    "        time.sleep(600)\nos.close(w)\nwhile os.read(r, 1):\n    pass\ntime.sleep(600)\n"
)
"""8 processes filling 100 socket pairs each: kernel memory no process maps."""
_FILES_BOMB = (
    "import time\nfor i in range(5):\n    with open(f'/work/f{i}', 'wb') as f:\n"
    "        f.write(b'x' * (60 << 20))\ntime.sleep(600)\n"
)
"""Five files of 60 MB in the working directory, each below ``file_size_mb``."""


@pytest.mark.parametrize(
    "bomb", [_MEMORY_BOMB, _SOCKET_BOMB, _FILES_BOMB], ids=["forks", "sockets", "files"]
)
async def test_codeact_reports_a_session_stopped_for_memory_to_the_model(
    repl: SubprocessRepl, bomb: str
) -> None:
    engine = ScriptedInference([f"```python\n{bomb}```", "Stopped."])
    sampled = watched(repl)
    try:
        agent = NativeOpenHandsAgent(engine, "m", repl=sampled)
        result = await agent.arun("Use all the memory you can")
    finally:
        if sampled is not repl:
            sampled.close()
    assert result.content == "Stopped."
    assert len(engine.requests) == 2
    seen = _seen_by_model(engine)
    assert f"the session used more than {LIMITS.memory_mb} MB of memory in total" in seen, seen


class _ScriptedServer(ThreadingHTTPServer):
    """A loopback OpenAI-compatible server answering with ``replies`` in turn."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies = replies
        self.bodies: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    server: _ScriptedServer

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, payload: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._send(
            json.dumps({"data": [{"id": "m", "object": "model"}]}).encode(), "application/json"
        )

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.server.bodies.append(body)
        index = min(len(self.server.bodies), len(self.server.replies)) - 1
        content = self.server.replies[index]
        if json.loads(body).get("stream"):
            chunk = {"choices": [{"index": 0, "delta": {"content": content}}]}
            end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            events = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n"
            self._send(events.encode(), "text/event-stream")
            return
        message = {"role": "assistant", "content": content}
        answer = {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        self._send(json.dumps(answer).encode(), "application/json")


def test_the_cli_keeps_the_secret_from_the_model(
    repl: SubprocessRepl, secret: tuple[Path, str], jarvis_home: Path
) -> None:
    key, value = secret
    server = _ScriptedServer([f"```python\n{_stealing_code(key)}```", "Nothing found."])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA", "VLLM"))}
        env["OPENJARVIS_HOME"] = str(jarvis_home)
        env["OPENAI_API_KEY"] = value  # the host's secret, which the code tries to read
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        completed = subprocess.run(
            [sys.executable, "-m", "jarvis", "ask", "-a", "native_openhands", "--base-url", url,
             "-m", "m", "Find my key"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert completed.returncode == 0, completed.stderr
    assert len(server.bodies) == 2, completed
    assert "found" in server.bodies[1] or "Error" in server.bodies[1]
    assert value not in server.bodies[1]
    assert value not in completed.stdout


def test_the_cli_stops_a_session_over_its_memory(repl: SubprocessRepl, jarvis_home: Path) -> None:
    """Through ``jarvis ask`` (its default limits: 512 MB): 800 MB in 8 processes."""
    if repl.plan().cgroups is not None:
        pytest.skip("the session has a cgroup here; the ordinary user's run has none")
    server = _ScriptedServer([f"```python\n{_MEMORY_BOMB}```", "Stopped."])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA", "VLLM"))}
        env["OPENJARVIS_HOME"] = str(jarvis_home)
        env["OPENAI_API_KEY"] = "sk-test"
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        completed = subprocess.run(
            [sys.executable, "-m", "jarvis", "ask", "-a", "native_openhands", "--base-url", url,
             "-m", "m", "Use all the memory you can"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert completed.returncode == 0, completed.stderr
    assert len(server.bodies) == 2, completed
    assert "the session used more than 512 MB of memory in total" in server.bodies[1]
    assert "Stopped." in completed.stdout
