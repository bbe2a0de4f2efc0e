"""Where ``jarvis serve``'s API key comes from, and in which order."""

from __future__ import annotations

from pathlib import Path

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.serve_access import ConfigKey, api_key_from

FILE_KEY = "from-the-key-file-0123456789"
CONFIG_KEY = "oj_sk_from-the-config-0123456789"


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key"
    path.write_text(FILE_KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def config_key(tmp_path: Path) -> ConfigKey:
    path = tmp_path / "config.toml"
    path.write_text(f'[server.auth]\napi_key = "{CONFIG_KEY}"\n')
    path.chmod(0o600)
    return ConfigKey(CONFIG_KEY, path)


def test_the_order_is_option_jarvis_variable_openjarvis_variable_config(
    monkeypatch: pytest.MonkeyPatch, key_file: Path, config_key: ConfigKey
) -> None:
    def chosen(
        flag: str | None = None, path: Path | None = None, env: dict[str, str] | None = None
    ) -> str | None:
        for name in ("JARVIS_API_KEY", "OPENJARVIS_API_KEY"):
            monkeypatch.delenv(name, raising=False)
            if name in (env or {}):
                monkeypatch.setenv(name, (env or {})[name])
        return api_key_from(flag, path, warn=False, config_key=config_key)

    both = {"JARVIS_API_KEY": "jarvis-variable-0123", "OPENJARVIS_API_KEY": "oj-variable-0123"}
    openjarvis = {"OPENJARVIS_API_KEY": "oj-variable-0123"}
    assert chosen(None, key_file, both) == FILE_KEY
    assert chosen("flag-0123456789abcdef", None, both) == "flag-0123456789abcdef"
    assert chosen(env=both) == "jarvis-variable-0123"
    assert chosen(env=openjarvis) == "oj-variable-0123"
    assert chosen(env={"JARVIS_API_KEY": "", **openjarvis}) == "oj-variable-0123"
    assert chosen() == CONFIG_KEY
    assert api_key_from(None, None, config_key=ConfigKey("", config_key.file)) is None
    assert api_key_from(None, None) is None


def test_both_variables_are_taken_out_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing the server starts inherits them."""
    import os

    monkeypatch.setenv("JARVIS_API_KEY", "jarvis-variable-0123")
    monkeypatch.setenv("OPENJARVIS_API_KEY", "oj-variable-0123")
    assert api_key_from(None, None) == "jarvis-variable-0123"
    assert "JARVIS_API_KEY" not in os.environ
    assert "OPENJARVIS_API_KEY" not in os.environ


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_config_key_others_may_read_is_refused_unshown(config_key: ConfigKey, mode: int) -> None:
    config_key.file.chmod(mode)
    with pytest.raises(ConfigurationError) as info:
        api_key_from(None, None, config_key=config_key)
    said = f"{info.value.message}\n{info.value.hint}"
    assert f"(mode {mode:04o})" in said
    assert f"chmod 600 {config_key.file}" in said
    assert CONFIG_KEY not in said
    assert CONFIG_KEY not in repr(config_key)


def test_a_config_file_others_may_read_is_fine_when_the_key_comes_from_elsewhere(
    monkeypatch: pytest.MonkeyPatch, config_key: ConfigKey
) -> None:
    config_key.file.chmod(0o644)
    monkeypatch.setenv("OPENJARVIS_API_KEY", "oj-variable-0123")
    assert api_key_from(None, None, config_key=config_key) == "oj-variable-0123"


def test_keys_are_trimmed_and_a_key_with_spaces_inside_is_refused_unshown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server compares the header's key trimmed: a key kept with spaces around it was
    accepted at start and matched no request (every one a 401)."""
    monkeypatch.delenv("JARVIS_API_KEY", raising=False)
    monkeypatch.delenv("OPENJARVIS_API_KEY", raising=False)
    path = tmp_path / "config.toml"
    path.write_text("")
    path.chmod(0o600)
    spaced = ConfigKey("   SUPERSECRETKEY12345   ", path)
    assert api_key_from(None, None, config_key=spaced) == "SUPERSECRETKEY12345"
    monkeypatch.setenv("OPENJARVIS_API_KEY", " oj-variable-0123\n")
    assert api_key_from(None, None) == "oj-variable-0123"
    for inside in ("two words-0123", "tab\there-0123", "bell\x07-0123"):
        with pytest.raises(ConfigurationError) as refused:
            api_key_from(None, None, config_key=ConfigKey(inside, path))
        assert "[server.auth] api_key in" in str(refused.value)
        assert inside not in str(refused.value)
