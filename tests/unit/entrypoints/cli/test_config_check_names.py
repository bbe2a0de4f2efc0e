"""``jarvis config check`` checks the names only the registries know (the default agent and
the default tools, plug-ins and MCP servers included), and ``jarvis ask`` says which key of
which file named an unknown default agent."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis.entrypoints.cli import app
from jarvis.entrypoints.cli.errors import EXIT_USAGE
from jarvis.entrypoints.composition import Container
from jarvis.testing import ScriptedInference
from tests.support.plugin_module import write_plugin_module

MCP = """[tools.mcp]
enabled = true
servers = '[{"name": "fs", "command": "never-started-by-config-check"}]'
"""


def run(*args: str) -> Result:
    container = Container()
    container.inference.override(ScriptedInference(["unused"]))
    return CliRunner().invoke(app, list(args), obj=container)


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = write_plugin_module(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_unknown_openjarvis_default_agent_is_invalid(tmp_path: Path) -> None:
    path = config(tmp_path, '[agent]\ndefault_agent = "nonexistent_agent"\n')
    result = run("config", "check", "--config", path)
    assert result.exit_code == EXIT_USAGE
    assert "valid" not in result.stdout
    assert f"Invalid config file {path}" in result.stderr
    assert "agent.default_agent: unknown agent 'nonexistent_agent'" in result.stderr
    assert "orchestrator" in result.stderr  # the known agents are listed


def test_unknown_default_agent_by_jarvis_key_is_invalid(tmp_path: Path) -> None:
    result = run("config", "check", "--config", config(tmp_path, '[agent]\ndefault = "gone"\n'))
    assert result.exit_code == EXIT_USAGE
    assert "agent.default: unknown agent 'gone'" in result.stderr


def test_unknown_enabled_tool_is_invalid(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        '[agent]\ndefault_agent = "orchestrator"\n'
        '[tools]\nenabled = "calculator,nonexistent_tool"\n',
    )
    result = run("config", "check", "--config", path)
    assert result.exit_code == EXIT_USAGE
    assert "tools.enabled: unknown tool 'nonexistent_tool' (known: calculator" in result.stderr
    assert "'calculator'" not in result.stderr


def test_both_unknown_names_are_reported_at_once(tmp_path: Path) -> None:
    path = config(tmp_path, '[agent]\ndefault = "gone"\n[tools]\nenabled = ["nope"]\n')
    result = run("config", "check", "--config", path)
    assert result.exit_code == EXIT_USAGE
    assert "unknown agent 'gone'" in result.stderr
    assert "unknown tool 'nope'" in result.stderr


def test_long_unknown_names_are_cut_in_the_messages(tmp_path: Path) -> None:
    agent, tool = "a" * 3000, "t" * 3000
    path = config(tmp_path, f'[agent]\ndefault = "{agent}"\n[tools]\nenabled = ["{tool}"]\n')
    result = run("config", "check", "--config", path)
    assert result.exit_code == EXIT_USAGE
    assert "unknown agent 'aaaa" in result.stderr
    assert "unknown tool 'tttt" in result.stderr
    assert agent not in result.stderr
    assert tool not in result.stderr
    assert len(result.stderr) < 2000


def test_known_names_are_valid(tmp_path: Path) -> None:
    path = config(
        tmp_path, '[agent]\ndefault_agent = "orchestrator"\n[tools]\nenabled = "calculator,think"\n'
    )
    result = run("config", "check", "--config", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{path}: valid")
    assert "warning" not in result.stdout


def test_plugin_agent_and_tool_are_known(tmp_path: Path, plugin_module: str) -> None:
    path = config(
        tmp_path,
        f'[plugins]\nmodules = ["{plugin_module}"]\n'
        '[agent]\ndefault = "reverse"\n[tools]\nenabled = ["count_letters"]\n',
    )
    result = run("config", "check", "--config", path)
    assert result.exit_code == 0, result.output


def test_mcp_servers_names_are_accepted_without_starting_them(tmp_path: Path) -> None:
    path = config(tmp_path, f'[tools]\nenabled = ["calculator", "fs", "fs.read_file"]\n{MCP}')
    result = run("config", "check", "--config", path)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stdout


def test_bare_unknown_name_with_mcp_servers_is_a_warning(tmp_path: Path) -> None:
    path = config(tmp_path, f'[tools]\nenabled = ["read_file"]\n{MCP}')
    result = run("config", "check", "--config", path)
    assert result.exit_code == 0, result.output
    assert "tools.enabled: warning: 'read_file' is no built-in or plug-in tool" in result.stdout
    assert "(fs)" in result.stdout
    listed = run("config", "check", "--config", path, "--json")
    keys = json.loads(listed.stdout)["keys"]
    assert {"key": "tools.enabled", "status": "warning"} in [
        {"key": k["key"], "status": k["status"]} for k in keys
    ]


def test_name_of_an_unconfigured_server_is_invalid(tmp_path: Path) -> None:
    path = config(tmp_path, f'[tools]\nenabled = ["git.status"]\n{MCP}')
    result = run("config", "check", "--config", path)
    assert result.exit_code == EXIT_USAGE
    assert "unknown tool 'git.status'" in result.stderr
    assert "MCP servers: fs" in result.stderr


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[agent]\ndefault_agent = "nonexistent_agent"\n', "[agent] default_agent"),
        ('[agent]\ndefault = "nonexistent_agent"\n', "[agent] default"),
    ],
)
def test_ask_names_the_key_and_file_of_an_unknown_default_agent(
    tmp_path: Path, text: str, key: str
) -> None:
    path = config(tmp_path, text)
    result = run("ask", "--config", path, "hi")
    assert result.exit_code == EXIT_USAGE
    assert f"Unknown agent 'nonexistent_agent' ({key} in {path})." in result.stderr
    assert "Traceback" not in result.output


def test_ask_with_an_agent_option_ignores_the_default(tmp_path: Path) -> None:
    path = config(tmp_path, '[agent]\ndefault_agent = "nonexistent_agent"\n')
    result = run("ask", "--config", path, "--agent", "simple", "--no-stream", "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout == "unused\n"


def test_a_key_in_a_file_others_may_read_is_a_warning_unshown(tmp_path: Path) -> None:
    """``jarvis serve`` refuses such a key: ``config check`` says so, not just "valid"."""
    path = config(tmp_path, '[server.auth]\napi_key = "oj_sk_never-shown-0123"\n')
    Path(path).chmod(0o644)
    result = run("config", "check", "--config", path)
    assert result.exit_code == 0, result.stderr
    assert "server.auth.api_key: warning: other users may read or change this file" in (
        result.stdout
    )
    assert "chmod 600" in result.stdout
    assert "never-shown" not in result.stdout + result.stderr
    Path(path).chmod(0o600)
    assert "warning" not in run("config", "check", "--config", path).stdout
