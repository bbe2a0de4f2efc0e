"""OpenJarvis's ``[tools.mcp] servers`` read as OpenJarvis reads it (its
``resolve_mcp_servers`` and MCP loader): the shapes, the keys, the names it derives."""

from __future__ import annotations

import json

import pytest

from jarvis.application.mcp_config import (
    McpServerSettings,
    McpSettings,
    OpenJarvisMcpFile,
    OpenJarvisMcpSettings,
    mcp_servers,
    openjarvis_servers,
    servers_file,
)
from jarvis.domain.errors import ConfigurationError


def settings(servers: object) -> OpenJarvisMcpSettings:
    text = servers if isinstance(servers, str) else json.dumps(servers)
    return OpenJarvisMcpSettings(enabled=True, servers=text)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("[]", None),
        (' {"name": "a"}', None),
        ("", None),
        ("  ", None),
        ("mcp-servers.json", "mcp-servers.json"),
        (" ~/mcp.json ", "~/mcp.json"),
        ("/etc/jarvis/mcp.json", "/etc/jarvis/mcp.json"),
    ],
)
def test_a_value_not_starting_with_a_bracket_or_brace_names_a_file(
    value: str, path: str | None
) -> None:
    assert servers_file(value) == path


def test_one_object_is_a_list_of_one_and_string_entries_are_parsed() -> None:
    one = openjarvis_servers(settings({"name": "ha", "url": "http://127.0.0.1:1/mcp"}))
    assert [(e.name, e.spec.url) for e in one] == [("ha", "http://127.0.0.1:1/mcp")]
    strings = openjarvis_servers(settings([json.dumps({"name": "s", "command": "srv"})]))
    assert [(e.name, e.spec.command) for e in strings] == [("s", "srv")]


def test_include_and_exclude_tools_filter_as_in_openjarvis() -> None:
    [entry] = openjarvis_servers(
        settings(
            [{"name": "a", "command": "x", "include_tools": ["r", "w"], "exclude_tools": ["w"]}]
        )
    )
    assert (entry.enabled_tools, entry.disabled_tools) == (("r", "w"), ("w",))
    assert [tool for tool in ("r", "w", "z") if entry.offers(tool)] == ["r"]


def test_a_token_is_a_bearer_header_and_no_message_quotes_it() -> None:
    [entry] = openjarvis_servers(settings([{"name": "a", "url": "http://h/mcp", "token": "t0k"}]))
    assert entry.spec.headers == {"Authorization": "Bearer t0k"}
    [plain] = openjarvis_servers(settings([{"name": "a", "url": "http://h/mcp", "token": ""}]))
    assert plain.spec.headers == {}
    for bad in ("t0k\nX-Other: 1", "t0k secret"):
        with pytest.raises(ConfigurationError) as caught:
            openjarvis_servers(settings([{"name": "a", "url": "http://h/mcp", "token": bad}]))
        assert "t0k" not in str(caught.value) + (caught.value.hint or "")


def test_an_entry_without_a_name_gets_a_free_mcp_number() -> None:
    entries = openjarvis_servers(
        settings(
            [{"command": "a"}, {"name": "mcp2", "command": "b"}, {"name": "", "command": "c"}]
        ),
        taken={"mcp1"},
    )
    assert [e.name for e in entries] == ["mcp3", "mcp2", "mcp4"]
    both = mcp_servers(
        McpSettings(servers={"mcp1": McpServerSettings(command="z")}), settings([{"command": "a"}])
    )
    assert [e.name for e in both] == ["mcp1", "mcp2"]


def test_a_file_read_at_load_is_named_in_messages_and_a_path_never_read_is_refused() -> None:
    where = r"^Invalid config file /c/config\.toml: tools\.mcp\.servers: the MCP servers file "
    loaded = OpenJarvisMcpFile(
        enabled=True, servers='{"name": 1}', path="/c/mcp.json", config_file="/c/config.toml"
    )
    with pytest.raises(ConfigurationError, match=where + r"/c/mcp\.json\[0\]\.name must"):
        openjarvis_servers(loaded)
    with pytest.raises(ConfigurationError, match=where + "/c/mcp.json is not valid JSON"):
        openjarvis_servers(
            OpenJarvisMcpFile(
                enabled=True, servers="", path="/c/mcp.json", config_file="/c/config.toml"
            )
        )
    with pytest.raises(ConfigurationError, match=r"names a file \('mcp\.json'\) that was not read"):
        openjarvis_servers(settings("mcp.json"))
    assert openjarvis_servers(OpenJarvisMcpSettings(enabled=False, servers="mcp.json")) == []


def test_a_name_twice_in_tools_mcp_is_named_as_such() -> None:
    """Not 'in [mcp.servers] and in [tools.mcp]' when [mcp.servers] is empty."""
    twice = settings([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}])
    with pytest.raises(ConfigurationError, match=r"'a' is configured twice: twice in \[tools"):
        mcp_servers(McpSettings(), twice)
    ours = McpSettings(servers={"a": McpServerSettings(command="z")})
    with pytest.raises(ConfigurationError, match=r"in \[mcp.servers\] and in \[tools.mcp\]"):
        mcp_servers(ours, settings([{"name": "a", "command": "x"}]))
