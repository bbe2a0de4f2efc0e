"""The claude_code runtime's own behaviour, over a fake runner that speaks the protocol
(a real child process: what the adapter does with hostile or broken runner output, a
missing or old Node, and the one-time install), and the agent over the in-memory runtime."""

from __future__ import annotations

import json
import stat
import textwrap
from pathlib import Path

import pytest

from contracts.external_runtime_contract import collect, done
from jarvis.adapters.claude_agent_sdk import ClaudeCodeRuntime
from jarvis.adapters.claude_agent_sdk.install import (
    STAMP,
    find_node,
    install_runner,
    parse_node_version,
    ready_dir,
    runner_sources,
)
from jarvis.application.registry import builtin_agents
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalRunRequest, ExternalTextDelta, ExternalToolDone
from jarvis.domain.json_types import JSONObject
from jarvis.domain.loop.options import AgentParts
from jarvis.testing import InMemoryExternalRuntime, InMemoryExternalRuntimes, ScriptedInference
from tests.support.jail import visible_python

FAKE_RUNNER = textwrap.dedent(
    """
    import json, sys
    START, END = "---OPENJARVIS_OUTPUT_START---", "---OPENJARVIS_OUTPUT_END---"
    request = json.loads(sys.stdin.read())
    prompt = request["prompt"]
    out = sys.stdout

    def block(code=0, **fields):
        body = {"content": "ok", "session_id": "sess-1", "num_turns": 1,
                "usage": {"input_tokens": 5, "output_tokens": 2}, "tool_results": [],
                "is_error": False, "subtype": "success", "error": ""}
        body.update(fields)
        out.write(START + "\\n" + json.dumps(body) + "\\n" + END + "\\n")
        out.flush()
        sys.exit(code)

    if prompt == "echo":
        out.write(json.dumps({"type": "text_delta", "text": "echo"}) + "\\n")
        block(content=json.dumps(request))
    if prompt == "tools":
        out.write('{"type":"session","session_id":"sess-1"}\\n')
        out.write('{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"a"}}\\n')
        out.write('{"type":"tool_result","tool_use_id":"t1","content":"wrote","is_error":false}\\n')
        out.write('{"type":"text_delta","text":"Do"}\\n{"type":"text_delta","text":"ne."}\\n')
        block(content="Done.", num_turns=2, tool_results=[{"tool_name": "Write",
              "tool_use_id": "t1", "input": {"file_path": "a"}, "content": "wrote",
              "is_error": False}])
    if prompt == "overlong":
        out.write('{"type":"text_delta","text":"' + "x" * (5 * 1024 * 1024) + '"}\\n')
        out.write("not json at all\\n{broken\\n")
        block()
    if prompt == "flood":
        line = json.dumps({"type": "text_delta", "text": "y" * 60000}) + "\\n"
        for _ in range(1200):
            out.write(line)
        block()
    if prompt == "badblock":
        out.write(START + "\\n{bad\\n" + END + "\\n")
        sys.exit(0)
    if prompt == "noblock":
        sys.stderr.write("runner: something broke badly\\n")
        sys.exit(3)
    if prompt == "refuse":
        block(2, is_error=True, subtype="error_input", error='field "x" must be y')
    if prompt == "error":
        block(1, is_error=True, subtype="error_during_execution", error="API Error: 500")
    block()
    """
)


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_node(bin_dir: Path, version: str = "v20.11.1") -> Path:
    """A ``node`` that reports ``version`` and runs its script with a Python the runner's
    jail shows."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    return _executable(
        bin_dir / "node",
        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo {version}; exit 0; }}\n'
        f'exec {visible_python()} "$@"\n',
    )


@pytest.fixture
def fake_runtime(tmp_path: Path) -> ClaudeCodeRuntime:
    runner = tmp_path / "runner"
    (runner / "node_modules").mkdir(parents=True)
    (runner / "runner.mjs").write_text(FAKE_RUNNER)
    _fake_node(tmp_path / "bin")
    return ClaudeCodeRuntime(
        install_root=tmp_path / "install",
        state_dir=tmp_path / "state",
        runner_dir=runner,
        node_path=str(tmp_path / "bin"),
    )


def _request(prompt: str, workspace: Path, **fields: object) -> ExternalRunRequest:
    fields.setdefault("api_key", "secret-key")
    return ExternalRunRequest(
        prompt=prompt,
        workspace=str(workspace),
        model="m",
        base_url="http://127.0.0.1:9",
        **fields,  # type: ignore[arg-type]
    )


async def test_the_request_carries_every_field_and_defaults_are_safe(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path
) -> None:
    result = done(
        await collect(fake_runtime, _request("echo", tmp_path, system_prompt="Be brief."))
    )
    sent = json.loads(result.content)
    assert sent["permission_mode"] == "acceptEdits"
    assert sent["api_key"] == "secret-key"
    assert sent["base_url"] == "http://127.0.0.1:9"
    assert sent["workspace"] == str(tmp_path)
    assert sent["system_prompt"] == "Be brief."
    assert sent["config_dir"] == str(tmp_path / "state")
    assert sent["max_turns"] >= 1
    assert sent["session_id"] == ""
    again = json.loads(done(await collect(fake_runtime, _request("echo", tmp_path))).content)
    assert again["session_id"] == "sess-1"  # the workspace's last session continues
    fresh = _request("echo", tmp_path, new_session=True)
    assert json.loads(done(await collect(fake_runtime, fresh)).content)["session_id"] == ""


async def test_tool_pairs_become_tool_results_and_usage_is_reported(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path
) -> None:
    events = await collect(fake_runtime, _request("tools", tmp_path))
    result = done(events)
    streamed = [e.result for e in events if isinstance(e, ExternalToolDone)]
    assert [(t.tool_name, t.content, t.call_id, t.success) for t in streamed] == [
        ("Write", "wrote", "t1", True)
    ]
    assert streamed[0].metadata == {"input": {"file_path": "a"}}
    assert "".join(e.text for e in events if isinstance(e, ExternalTextDelta)) == "Done."
    assert result.tool_results == tuple(streamed)
    assert (result.turns, result.usage.prompt_tokens, result.usage.completion_tokens) == (2, 5, 2)


async def test_an_overlong_line_and_noise_are_skipped(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path
) -> None:
    events = await collect(fake_runtime, _request("overlong", tmp_path))
    assert done(events).content == "ok"
    assert not any(isinstance(e, ExternalTextDelta) for e in events)


async def test_a_flood_of_output_is_stopped(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path
) -> None:
    with pytest.raises(ExternalRuntimeError, match="more than 64 MiB"):
        await collect(fake_runtime, _request("flood", tmp_path))
    assert fake_runtime.running == ()


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("badblock", "final block is malformed"),
        ("noblock", "exit code 3"),
        ("refuse", 'refused the request: field "x" must be y'),
        ("error", "claude_code failed (error_during_execution): API Error: 500"),
    ],
)
async def test_a_broken_runner_is_a_clear_error(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path, prompt: str, message: str
) -> None:
    with pytest.raises(ExternalRuntimeError) as caught:
        await collect(fake_runtime, _request(prompt, tmp_path))
    assert message in str(caught.value)
    if prompt == "noblock":
        assert "something broke badly" in caught.value.hint


async def test_unknown_sessions_and_bad_modes_are_refused_before_anything_runs(
    fake_runtime: ClaudeCodeRuntime, tmp_path: Path
) -> None:
    for session in ("no-such-session", "../../etc/passwd", "x" * 200):
        with pytest.raises(ConfigurationError, match="no session"):
            await collect(fake_runtime, _request("echo", tmp_path, session_id=session))
    with pytest.raises(ConfigurationError, match="permission mode"):
        await collect(fake_runtime, _request("echo", tmp_path, permission_mode="yolo"))
    with pytest.raises(ConfigurationError, match="Anthropic API key"):
        await collect(fake_runtime, _request("echo", tmp_path, api_key=""))
    with pytest.raises(ConfigurationError, match="not a directory"):
        await collect(fake_runtime, _request("echo", tmp_path / "missing"))


# --- node and the install ---------------------------------------------------------------------


def test_node_versions() -> None:
    assert parse_node_version("v20.20.2\n") == (20, 20, 2)
    assert parse_node_version("v18.14.0-nightly") == (18, 14, 0)
    assert parse_node_version("garbage") is None


def test_node_missing_or_too_old_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ExternalRuntimeError, match="not installed") as missing:
        find_node(str(tmp_path / "empty"))
    assert "18.14" in missing.value.hint
    _fake_node(tmp_path / "old", "v18.13.9")
    with pytest.raises(ExternalRuntimeError, match=r"18\.13\.9 is too old"):
        find_node(str(tmp_path / "old"))
    _fake_node(tmp_path / "ok", "v18.14.0")
    assert find_node(str(tmp_path / "ok")).version == (18, 14, 0)


def _sources(tmp_path: Path) -> Path:
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "package.json").write_text('{"name": "r", "version": "9.9.9"}')
    (sources / "package-lock.json").write_text("{}")
    (sources / "runner.mjs").write_text("// v1\n")
    return sources


def _fake_npm(tmp_path: Path, code: int = 0) -> tuple[Path, Path]:
    calls = tmp_path / "npm-calls"
    npm = _executable(
        tmp_path / "npm",
        f'#!/bin/sh\necho "$@" >> {calls}\necho installing... >&2\n'
        f"mkdir -p node_modules\nexit {code}\n",
    )
    return npm, calls


def test_the_runner_is_installed_once_per_version_and_sources(tmp_path: Path) -> None:
    sources = _sources(tmp_path)
    npm, calls = _fake_npm(tmp_path)
    root = tmp_path / "config" / "claude_code_runner"
    target = install_runner(root, sources=sources, npm=str(npm))
    assert target == root / "9.9.9"
    assert (target / "runner.mjs").read_text() == "// v1\n"
    assert (target / "node_modules").is_dir()
    assert (target / STAMP).is_file()
    assert calls.read_text().split() == ["ci", "--omit=dev", "--no-save", "--loglevel=http"]
    assert install_runner(root, sources=sources, npm=str(npm)) == target
    assert len(calls.read_text().splitlines()) == 1  # not installed again
    (sources / "runner.mjs").write_text("// v2\n")
    install_runner(root, sources=sources, npm=str(npm))
    assert len(calls.read_text().splitlines()) == 2
    assert (target / "runner.mjs").read_text() == "// v2\n"
    assert oct(root.stat().st_mode & 0o777) == "0o700"


def test_a_failed_install_leaves_nothing_half_done(tmp_path: Path) -> None:
    sources = _sources(tmp_path)
    npm, _ = _fake_npm(tmp_path, code=1)
    root = tmp_path / "root"
    with pytest.raises(ExternalRuntimeError, match="npm ci exited 1"):
        install_runner(root, sources=sources, npm=str(npm))
    assert not (root / "9.9.9").exists()
    assert [p.name for p in root.iterdir()] == [".lock"]


def test_a_machine_without_npm_is_told_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ExternalRuntimeError, match="npm is not installed") as caught:
        install_runner(tmp_path / "root", sources=_sources(tmp_path))
    assert "Node.js" in caught.value.hint


def test_the_checkout_ships_the_runner_sources() -> None:
    sources = runner_sources()
    assert (sources / "runner.mjs").is_file()
    assert json.loads((sources / "package.json").read_text())["version"]


def test_a_ready_dir_must_hold_a_runner(tmp_path: Path) -> None:
    assert ready_dir({}) is None
    with pytest.raises(ExternalRuntimeError, match="holds no installed runner"):
        ready_dir({"JARVIS_CLAUDE_CODE_RUNNER_DIR": str(tmp_path)})


# --- the agent ----------------------------------------------------------------------------------


def _parts(fake: InMemoryExternalRuntime, *, engine: str = "llamacpp") -> AgentParts:
    return AgentParts(
        inference=ScriptedInference(engine_id=engine, base_url=""),
        model="local-model",
        runtimes=InMemoryExternalRuntimes({"claude_code": fake}),
    )


async def test_the_agent_runs_on_any_engine_with_safe_defaults(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime(runtime_id="claude_code")
    parts = _parts(fake)
    agent = builtin_agents().create(
        "claude_code",
        parts,
        {"workspace": str(tmp_path), "allowed_tools": "Read, Write", "max_turns": 4},
    )
    result = await agent.arun("write a file")
    assert result.content == "Done."
    sent = fake.requests[0]
    assert sent.engine is parts.inference  # the embedded engine too: no OpenAI URL needed
    assert (sent.base_url, sent.api_key, sent.model) == ("", "", "local-model")
    assert sent.permission_mode == "acceptEdits"
    assert sent.allowed_tools == ("Read", "Write")
    assert sent.max_turns == 4
    assert sent.timeout == 300


async def test_the_cloud_needs_an_explicit_choice_and_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = InMemoryExternalRuntime(runtime_id="claude_code")
    options: JSONObject = {"workspace": str(tmp_path), "cloud": True}
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    agent = builtin_agents().create("claude_code", _parts(fake), options)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        await agent.arun("hi")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    await agent.arun("hi")
    sent = fake.requests[0]
    assert (sent.engine, sent.base_url, sent.api_key, sent.model) == (None, "", "sk-ant-test", "")
    plain = builtin_agents().create("claude_code", _parts(fake), {"workspace": str(tmp_path)})
    await plain.arun("hi")
    assert fake.requests[1].api_key == ""  # a key in the environment alone never means cloud
    assert fake.requests[1].engine is not None


def test_unknown_permission_modes_are_refused(tmp_path: Path) -> None:
    fake = InMemoryExternalRuntime(runtime_id="claude_code")
    with pytest.raises(ConfigurationError, match="permission mode"):
        builtin_agents().create(
            "claude_code", _parts(fake), {"workspace": str(tmp_path), "permission_mode": "yolo"}
        )


def test_the_wheel_ships_every_runner_source() -> None:
    import tomllib

    from jarvis.adapters.claude_agent_sdk.install import SOURCES

    root = Path(__file__).resolve().parents[4]
    build = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    shipped = build["targets"]["wheel"]["force-include"]
    for name in SOURCES:
        assert (root / "claude_code_runner" / name).is_file(), name
        assert shipped[f"claude_code_runner/{name}"] == f"jarvis/_claude_code_runner/{name}"


def test_the_container_builds_the_runtime_with_its_loopback_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.http.loopback_endpoint import LoopbackEndpoint
    from jarvis.entrypoints.settings import load_config

    monkeypatch.setenv("OPENJARVIS_HOME", str(tmp_path))
    # the container is kept: once it is collected, its resources shut down (runtimes closed)
    container = bootstrap(load_config()).container
    try:
        runtimes = container.external_runtimes()
        runtime = runtimes.get("claude_code")
        assert isinstance(runtime, ClaudeCodeRuntime)
        assert isinstance(runtime.endpoint, LoopbackEndpoint)
        assert runtime.state_dir == tmp_path / "runtimes" / "claude_code"
        assert runtime.install_root == tmp_path / "claude_code_runner"
        assert runtimes.get("claude_code") is runtime
    finally:
        container.shutdown_resources()
