"""OpenJarvis's ``[tools.mcp] servers`` in every form OpenJarvis accepts, through the real
command line and a real MCP server (``tests/support/mcp_reference_server.py``): a file of
servers, one object, entries that are JSON strings, ``exclude_tools``, ``token``, an entry
without a name; a tool named bare in ``[tools] enabled``, as OpenJarvis names MCP tools;
``jarvis mcp list`` with no server. Every test ends with a look at the process table."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_mcp_cli import SERVER, http_reference_server, jarvis
from tests.support.processes import processes_with
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

TOKEN = "tok-7f3a9c1e5b"
"""The bearer token of the HTTP server: never in any output."""


@pytest.fixture
def tag() -> Iterator[str]:
    word = f"mcp-oj-{uuid.uuid4().hex}"
    yield word
    assert processes_with(word) == [], "an MCP server outlived its jarvis command"


def stdio_server(tag: str, **extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [SERVER, "--tag", tag], **extra}


def tools_mcp(servers: object, extra: str = "") -> str:
    """A ``[tools.mcp]`` table whose ``servers`` is ``servers`` (a string: as it is, else
    its JSON), as TOML."""
    value = servers if isinstance(servers, str) else json.dumps(servers)
    return f"[tools.mcp]\nenabled = true\nservers = {json.dumps(value)}\n{extra}"


def listed(config: Path) -> dict[str, dict[str, object]]:
    result = jarvis("mcp", "list", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


def enabled_tools(row: dict[str, object]) -> list[str]:
    tools = row["tools"]
    assert isinstance(tools, list)
    return sorted(tool["name"] for tool in tools if tool["enabled"])


# --- the forms of [tools.mcp] servers ---------------------------------------------------


@pytest.mark.parametrize("shape", ["array", "object"])
def test_servers_may_name_a_file_beside_the_config(tmp_path: Path, tag: str, shape: str) -> None:
    server = stdio_server(tag, name="files", include_tools=["echo", "add"])
    (tmp_path / "mcp-servers.json").write_text(json.dumps([server] if shape == "array" else server))
    config = tmp_path / "config.toml"
    config.write_text(tools_mcp("mcp-servers.json"))
    checked = jarvis("config", "check", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    called = jarvis("mcp", "call", "files.add", '{"a": 40, "b": 2}', "--config", str(config))
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"sum": 42}
    assert enabled_tools(listed(config)["files"]) == ["add", "echo"]
    tools = jarvis("tools", "--json", "--config", str(config))
    assert tools.returncode == 0, tools.stderr
    assert "files_echo" in {row["name"] for row in json.loads(tools.stdout)}


def test_an_inline_object_and_entries_that_are_json_strings(tmp_path: Path, tag: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(tools_mcp(json.dumps(stdio_server(tag, name="one"))))
    assert list(listed(config)) == ["one"]
    strings = [json.dumps(stdio_server(tag, name="two", include_tools=["echo"]))]
    config.write_text(tools_mcp(strings))
    called = jarvis("mcp", "call", "two.echo", '{"text": "in a string"}', "--config", str(config))
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "in a string"


def test_servers_listed_without_an_enabled_line_are_used_as_in_openjarvis(
    tmp_path: Path, tag: str
) -> None:
    """OpenJarvis's ``[tools.mcp] enabled`` is on by default: a config that lists servers
    and says nothing more uses them; ``enabled = false`` turns them off."""
    config = tmp_path / "config.toml"
    servers = json.dumps([stdio_server(tag, name="plain")])
    config.write_text(f"[tools.mcp]\nservers = {json.dumps(servers)}\n")
    called = jarvis("mcp", "call", "plain.add", '{"a": 40, "b": 2}', "--config", str(config))
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"sum": 42}
    config.write_text(f"[tools.mcp]\nenabled = false\nservers = {json.dumps(servers)}\n")
    assert listed(config) == {}


def test_exclude_tools_is_read_as_disabled_tools(tmp_path: Path, tag: str) -> None:
    config = tmp_path / "config.toml"
    server = stdio_server(tag, name="ex", include_tools=["echo", "add"], exclude_tools=["add"])
    config.write_text(tools_mcp([server]))
    assert enabled_tools(listed(config)["ex"]) == ["echo"]
    refused = jarvis("mcp", "call", "ex.add", '{"a": 1, "b": 2}', "--config", str(config))
    assert refused.returncode != 0
    assert "add" in refused.stderr


def test_an_entry_without_a_name_gets_one_no_server_has(tmp_path: Path, tag: str) -> None:
    config = tmp_path / "config.toml"
    taken = f"[mcp.servers.mcp1]\ncommand = {json.dumps(sys.executable)}\nenabled = false\n"
    nameless = stdio_server(tag, include_tools=["echo"])
    config.write_text(tools_mcp([nameless, stdio_server(tag, name="mcp2")]) + taken)
    rows = listed(config)
    assert sorted(rows) == ["mcp2", "mcp3"]
    assert enabled_tools(rows["mcp3"]) == ["echo"]
    called = jarvis("mcp", "call", "mcp3.echo", '{"text": "nameless"}', "--config", str(config))
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "nameless"


@pytest.fixture
def http_server(tmp_path: Path, tag: str) -> Iterator[str]:
    """The reference server over streamable HTTP, refusing a request without the token."""
    with http_reference_server(tmp_path, tag, f"Bearer {TOKEN}") as url:
        yield url


def test_a_token_is_sent_as_a_bearer_header_and_never_shown(
    tmp_path: Path, http_server: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(tools_mcp([{"name": "ha", "url": http_server}]))
    refused = jarvis("mcp", "call", "ha.add", '{"a": 1, "b": 1}', "--config", str(config))
    assert refused.returncode == 1  # the server wants the token
    config.write_text(tools_mcp([{"name": "ha", "url": http_server, "token": TOKEN}]))
    called = jarvis("mcp", "call", "ha.add", '{"a": 20, "b": 22}', "--config", str(config))
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"sum": 42}
    outputs = [
        jarvis(*args, "--config", str(config))
        for args in (
            ["mcp", "list"],
            ["mcp", "list", "--json"],
            ["config", "check"],
            ["config", "check", "--json"],
            ["tools", "--json"],
        )
    ]
    assert all(result.returncode == 0 for result in outputs), [r.stderr for r in outputs]
    assert "ha.add" in outputs[0].stdout
    for result in outputs:
        assert TOKEN not in result.stdout + result.stderr
    config.write_text(tools_mcp([{"name": "ha", "url": http_server, "token": TOKEN + " x"}]))
    bad = jarvis("mcp", "list", "--config", str(config))
    assert bad.returncode == 2
    assert "token must be a string of printable ASCII" in bad.stderr
    assert TOKEN not in bad.stdout + bad.stderr


# --- a file that cannot be read ------------------------------------------------------------


def _missing(folder: Path) -> str:
    return "absent.json"


def _outside(folder: Path) -> str:
    (folder.parent / f"{folder.name}-servers.json").write_text("[]")
    return f"../{folder.name}-servers.json"


def _fifo(folder: Path) -> str:
    os.mkfifo(folder / "pipe.json")
    return "pipe.json"


def _too_large(folder: Path) -> str:
    (folder / "big.json").write_text("[" + " " * (4 * 1024 * 1024) + "]")
    return "big.json"


def _secret(folder: Path) -> str:
    (folder / "credentials.json").write_text("[]")
    return "credentials.json"


def _secret_through_a_link(folder: Path) -> str:
    """``.config`` kept as a link (a dotfile manager's): the path as written names
    ``.config/gcloud``, the resolved one does not."""
    (folder / "dotfiles" / "config" / "gcloud").mkdir(parents=True)
    (folder / "dotfiles" / "config" / "gcloud" / "servers.json").write_text("[]")
    (folder / ".config").symlink_to(folder / "dotfiles" / "config")
    return ".config/gcloud/servers.json"


def _not_utf8(folder: Path) -> str:
    (folder / "latin.json").write_bytes(b'[{"name": "caf\xe9"}]')
    return "latin.json"


def _bad_json(folder: Path) -> str:
    (folder / "bad.json").write_text('[{"name": "x",}]')
    return "bad.json"


def _nested(folder: Path) -> str:
    (folder / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    return "deep.json"


def _empty(folder: Path) -> str:
    (folder / "empty.json").write_text("")
    return "empty.json"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_missing, "cannot read the MCP servers file {folder}/absent.json (No such file"),
        (_outside, "leads out of the config file's folder"),
        (_fifo, "the MCP servers file '{folder}/pipe.json' is a named pipe, not a regular file"),
        (_too_large, "the MCP servers file '{folder}/big.json' is too large"),
        (_secret, "is a secret file (it matches 'credentials*')"),
        (_secret_through_a_link, "is a secret file (it matches '.config/gcloud')"),
        (_not_utf8, "is not UTF-8 text"),
        (_bad_json, "the MCP servers file {folder}/bad.json is not valid JSON"),
        (_nested, "the MCP servers file {folder}/deep.json is not valid JSON"),
        (_empty, "the MCP servers file {folder}/empty.json is not valid JSON"),
    ],
    ids=lambda value: value.__name__.strip("_") if callable(value) else "",
)
def test_a_servers_file_that_cannot_be_used_is_a_usage_error_naming_it(
    tmp_path: Path, make: object, message: str
) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    assert callable(make)
    config = folder / "config.toml"
    config.write_text(tools_mcp(make(folder)))
    for args in (["config", "check"], ["mcp", "list"], ["tools"]):
        result = jarvis(*args, "--config", str(config), timeout=60)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        # worded as every other error of the config file
        assert result.stderr.startswith(
            f"jarvis: Invalid config file {config}: tools.mcp.servers: "
        )
        assert message.format(folder=folder) in " ".join(result.stderr.split()), result.stderr
        assert "Traceback" not in result.stderr


def test_a_disabled_table_reads_no_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[tools.mcp]\nenabled = false\nservers = "absent.json"\n')
    result = jarvis("config", "check", "--config", str(config))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ([{"name": "x", "command": "a", "exclude_tool": ["b"]}], "unknown keys: exclude_tool"),
        ([{"name": 3, "command": "a"}], "[tools.mcp] servers[0].name must be a string"),
        (["{not json"], "[tools.mcp] servers[0] (a JSON string) is not valid JSON"),
        (["[" * 100_000 + "]" * 100_000], "[tools.mcp] servers[0] (a JSON string) is not valid"),
        ([{"name": "x", "command": "a", "token": "t"}], "token applies to a url"),
        ([{"command": "a"}] * 65, "At most 64 MCP servers"),
        ('"mcp.json"', "must be a JSON array of server objects (or one)"),
    ],
    ids=["unknown-key", "bad-name", "bad-string", "deep-string", "token-stdio", "too-many", "str"],
)
def test_a_bad_entry_is_a_usage_error(tmp_path: Path, servers: object, message: str) -> None:
    folder = tmp_path
    config = folder / "config.toml"
    if servers == '"mcp.json"':  # a file holding a JSON string
        (folder / "mcp.json").write_text('"just a string"')
        servers = "mcp.json"
        message = f"tools.mcp.servers: the MCP servers file {folder}/mcp.json " + message
    config.write_text(tools_mcp(servers))
    result = jarvis("config", "check", "--config", str(config))
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# --- a bare MCP tool name in [tools] enabled -------------------------------------------------


def test_a_bare_tool_name_in_tools_enabled_is_the_one_server_tool_of_that_name(
    tmp_path: Path, tag: str
) -> None:
    config = tmp_path / "config.toml"
    table = tools_mcp([stdio_server(tag, name="ref")], '[tools.approval]\ndefault = "auto"\n')
    config.write_text('[tools]\nenabled = ["think", "add"]\n' + table)
    script = [Reply(tool_calls=[tool_call("c1", "ref_add", {"a": 2, "b": 40})]), Reply("42.")]
    with ScriptedEngine(script) as engine:
        result = jarvis(
            "ask", "--no-keep", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "What is 2+40?",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        offered = engine.requests[0]["tools"]
        assert isinstance(offered, list)
        assert sorted(t["function"]["name"] for t in offered) == ["ref_add", "think"]
        answers = [m for m in engine.messages(1) if m["role"] == "tool"]
        assert json.loads(str(answers[0]["content"])) == {"sum": 42}
    assert "42." in result.stdout


def test_a_bare_name_two_servers_offer_is_a_usage_error_naming_both(
    tmp_path: Path, tag: str
) -> None:
    config = tmp_path / "config.toml"
    servers = [stdio_server(tag, name="left"), stdio_server(tag, name="right")]
    config.write_text('[tools]\nenabled = ["echo"]\n' + tools_mcp(servers))
    with ScriptedEngine([Reply("unused")]) as engine:
        result = jarvis(
            "ask", "--no-keep", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", "Hello",
        )  # fmt: skip
        assert engine.requests == []
    assert result.returncode == 2, result.stderr
    assert "Tool 'echo' is offered by more than one MCP server: left.echo, right.echo" in (
        result.stderr
    )


def test_an_operator_stores_a_bare_tool_name_as_its_server_tool(tmp_path: Path, tag: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(tools_mcp([stdio_server(tag, name="ref")]))
    added = jarvis(
        "operators", "add", "echoer", "--prompt", "Echo.", "--tools", "echo,think",
        "--json", "--config", str(config),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["tools"] == ["ref.echo", "think"]


# --- jarvis mcp list with no server ----------------------------------------------------------


@pytest.mark.parametrize("table", ["[tools.mcp]\nenabled = true\n", ""], ids=["enabled", "none"])
def test_mcp_list_without_a_server_says_so_and_succeeds(tmp_path: Path, table: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(table)
    text = jarvis("mcp", "list", "--config", str(config))
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip() == "No MCP server is configured ([mcp.servers.NAME] or [tools.mcp])."
    as_json = jarvis("mcp", "list", "--json", "--config", str(config))
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == []
    call = jarvis("mcp", "call", "x.y", "--config", str(config))
    assert call.returncode == 2
    assert "No MCP server is configured" in call.stderr
