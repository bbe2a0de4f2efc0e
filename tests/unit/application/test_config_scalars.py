"""Every number and flag of the configuration is of TOML's own type, whatever the field: a
boolean is never a number, a quoted number never a number, an integer never a flag. The
fields are found by walking the schema, so a field added later is covered too."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import get_type_hints

import pytest

from jarvis.application.config import JarvisConfig
from jarvis.application.config_scalars import loose_scalars
from jarvis.application.mcp_config import McpServerSettings
from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.settings import read_config


def scalar_fields(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(path, kind) of every field typed int, float or bool (optional or bounded too):
    kind ``integer``, ``number`` or ``bool``."""
    assert is_dataclass(cls)
    found: list[tuple[tuple[str, ...], str]] = []
    hints = get_type_hints(cls)
    for spec in fields(cls):
        hint = hints[spec.name]
        path = (*prefix, spec.name)
        if isinstance(hint, type) and is_dataclass(hint):
            found += scalar_fields(hint, path)
            continue
        members = (hint, *getattr(hint, "__args__", ()))
        for kind, name in ((bool, "bool"), (int, "integer"), (float, "number")):
            if any(member is kind for member in members):
                found.append((path, name))
                break
    return found


FIELDS = [*scalar_fields(JarvisConfig)] + [
    (("mcp", "servers", "x", *path), kind) for path, kind in scalar_fields(McpServerSettings)
]


def toml_file(path: tuple[str, ...], value: str) -> str:
    table = ".".join(path[:-1])
    extra = 'command = "a"\n' if path[:2] == ("mcp", "servers") else ""
    return f"[{table}]\n{extra}{path[-1]} = {value}\n" if table else f"{path[-1]} = {value}\n"


def test_the_schema_has_the_fields_looked_for() -> None:
    paths = {".".join(path) for path, _ in FIELDS}
    assert {"agent.temperature", "server.port", "traces.enabled", "mcp.servers.x.timeout"} <= paths
    assert len(FIELDS) > 40


@pytest.mark.parametrize(("path", "kind"), FIELDS, ids=[".".join(path) for path, _ in FIELDS])
def test_a_value_of_another_type_is_refused_naming_key_value_and_type(
    tmp_path: Path, path: tuple[str, ...], kind: str
) -> None:
    wrong = {"integer": ["true", '"1"', "1.5"], "number": ["true", '"1"'], "bool": ["1", '"true"']}
    expected = {"integer": "an integer", "number": "a number", "bool": "true or false"}[kind]
    dotted = ".".join(path)
    file = tmp_path / "config.toml"
    for value in wrong[kind]:
        file.write_text(toml_file(path, value), encoding="utf-8")
        with pytest.raises(ConfigurationError) as info:
            read_config(file, env={"OPENJARVIS_HOME": str(tmp_path)})
        assert info.value.message.startswith(f"Invalid config file {file}: {dotted}: {value} (")
        assert f") is not {expected}" in info.value.message


def test_a_quoted_number_is_told_to_drop_its_quotes_and_a_word_is_not() -> None:
    assert loose_scalars(JarvisConfig, {"server": {"port": " 8000 "}}) == [
        (("server", "port"), '" 8000 " (a string) is not an integer; write it without quotes')
    ]
    assert loose_scalars(JarvisConfig, {"agent": {"temperature": "warm"}}) == [
        (("agent", "temperature"), '"warm" (a string) is not a number')
    ]
    assert loose_scalars(JarvisConfig, {"agent": {"temperature": "inf"}}) == [
        (("agent", "temperature"), '"inf" (a string) is not a number')
    ]


def test_values_of_their_own_type_and_other_shapes_are_left_to_validation() -> None:
    data = {
        "agent": {"temperature": 1, "max_turns": 5, "context_from_memory": True, "x": "y"},
        "tools": {"enabled": ["think", 3], "approval": {"tools": {"think": "auto"}}},
        "server": {"port": [8000], "workers": {"n": 1}},
        "mcp": {"servers": {"x": {"command": "a", "timeout": 30, "max_restarts": 2}}},
        "engine": "ollama",
    }
    assert loose_scalars(JarvisConfig, data) == []


def test_every_value_in_an_array_or_a_table_of_sections_is_looked_at() -> None:
    servers = {"a": {"timeout": True}, "b": {"enabled": "no", "max_restarts": 2.0}}
    assert loose_scalars(JarvisConfig, {"mcp": {"servers": servers}}) == [
        (("mcp", "servers", "a", "timeout"), "true (a boolean) is not a number"),
        (("mcp", "servers", "b", "enabled"), '"no" (a string) is not true or false'),
        (("mcp", "servers", "b", "max_restarts"), "2.0 (a float) is not an integer"),
    ]
