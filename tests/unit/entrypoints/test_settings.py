"""Loading config.toml: where it lives, what overrides it, and how bad files are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.settings import (
    EngineOverrides,
    config_dir,
    config_file,
    load_config,
    normalize_ollama_host,
    normalize_vllm_host,
)


def write(home: Path, text: str) -> Path:
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestConfigDir:
    def test_openjarvis_home_wins(self, tmp_path: Path) -> None:
        env = {"OPENJARVIS_HOME": str(tmp_path / "a"), "XDG_DATA_HOME": str(tmp_path / "x")}
        assert config_dir(env) == tmp_path / "a"

    def test_xdg_data_home_next(self, tmp_path: Path) -> None:
        assert config_dir({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "openjarvis"

    def test_home_dot_openjarvis_last(self) -> None:
        assert config_dir({}) == Path.home() / ".openjarvis"

    def test_file_is_config_toml(self, tmp_path: Path) -> None:
        assert config_file({"OPENJARVIS_HOME": str(tmp_path)}) == tmp_path / "config.toml"


class TestLoading:
    def test_missing_default_file_means_defaults(self, jarvis_home: Path) -> None:
        config = load_config()
        assert config.engine.name == "auto"
        assert config.agent.default == "simple"

    def test_file_values_are_read(self, jarvis_home: Path) -> None:
        write(
            jarvis_home,
            '[engine]\nname = "vllm"\nmodel = "qwen"\ntimeout = 5\n'
            '[engine.vllm]\nbase_url = "http://gpu:8000/v1"\n[agent]\ndefault = "simple"\n',
        )
        config = load_config()
        assert config.engine.name == "vllm"
        assert config.engine.model == "qwen"
        assert config.engine.timeout == 5
        assert config.engine.vllm.base_url == "http://gpu:8000/v1"

    def test_agent_max_turns_is_unset_by_default_and_read_when_set(self, jarvis_home: Path) -> None:
        assert load_config().agent.max_turns is None  # each agent keeps its own default
        write(jarvis_home, "[agent]\nmax_turns = 4\n")
        assert load_config().agent.max_turns == 4

    def test_explicit_path_must_exist(self, tmp_path: Path) -> None:
        missing = tmp_path / "nope.toml"
        with pytest.raises(ConfigurationError, match="not found") as info:
            load_config(missing)
        assert str(missing) in str(info.value)

    def test_explicit_path_is_read(self, tmp_path: Path) -> None:
        path = tmp_path / "other.toml"
        path.write_text('[engine]\nname = "ollama"\n', encoding="utf-8")
        assert load_config(path).engine.name == "ollama"


class TestInvalidFiles:
    def test_unknown_key_names_file_and_key(self, jarvis_home: Path) -> None:
        path = write(jarvis_home, "[engine]\ntimout = 5\n")
        with pytest.raises(ConfigurationError) as info:
            load_config()
        message = str(info.value)
        assert str(path) in message
        assert "engine.timout: unknown key (did you mean engine.timeout?)" in message

    def test_bad_value_names_nested_key(self, jarvis_home: Path) -> None:
        write(jarvis_home, "[engine.ollama]\nnum_ctx = -1\n")
        with pytest.raises(ConfigurationError, match=r"engine\.ollama\.num_ctx"):
            load_config()

    def test_max_turns_must_be_positive(self, jarvis_home: Path) -> None:
        write(jarvis_home, "[agent]\nmax_turns = 0\n")
        with pytest.raises(ConfigurationError, match=r"agent\.max_turns"):
            load_config()

    def test_unknown_engine_name(self, jarvis_home: Path) -> None:
        write(jarvis_home, '[engine]\nname = "gpt"\n')
        with pytest.raises(ConfigurationError, match=r"engine\.name"):
            load_config()

    def test_section_that_is_not_a_table(self, jarvis_home: Path) -> None:
        write(jarvis_home, 'engine = "ollama"\n')
        with pytest.raises(ConfigurationError, match=r"config\.toml.*engine"):
            load_config()

    def test_bad_toml_names_file(self, jarvis_home: Path) -> None:
        path = write(jarvis_home, "[engine\nname = 1\n")
        with pytest.raises(ConfigurationError, match="not valid TOML") as info:
            load_config()
        assert str(path) in str(info.value)


class TestEnvironment:
    def test_engine_hosts_from_environment(self) -> None:
        env = {
            "OLLAMA_HOST": "gpu-box",
            "VLLM_HOST": "http://gpu:8001",
            "OPENAI_BASE_URL": "https://llm.example/v1/",
            "OPENAI_API_KEY": "sk-test",
            "OPENJARVIS_HOME": "/nonexistent-jarvis-home",
        }
        config = load_config(env=env)
        assert config.engine.ollama.host == "http://gpu-box:11434"
        assert config.engine.vllm.base_url == "http://gpu:8001/v1"
        assert config.engine.openai.base_url == "https://llm.example/v1"
        assert config.engine.openai.api_key == "sk-test"

    def test_environment_overrides_file(self, jarvis_home: Path) -> None:
        write(jarvis_home, '[engine.ollama]\nhost = "http://file:11434"\n')
        env = {"OPENJARVIS_HOME": str(jarvis_home), "OLLAMA_HOST": "http://env:1234"}
        assert load_config(env=env).engine.ollama.host == "http://env:1234"

    def test_options_override_environment(self, jarvis_home: Path) -> None:
        env = {"OPENJARVIS_HOME": str(jarvis_home), "OPENAI_BASE_URL": "http://env/v1"}
        overrides = EngineOverrides(engine="openai", base_url="http://flag/v1", model="m")
        config = load_config(env=env, overrides=overrides)
        assert config.engine.openai.base_url == "http://flag/v1"
        assert config.engine.model == "m"

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("localhost", "http://localhost:11434"),
            ("0.0.0.0:9999", "http://0.0.0.0:9999"),
            ("https://ollama.example", "https://ollama.example"),
            ("http://h:1/", "http://h:1"),
        ],
    )
    def test_ollama_host_forms(self, value: str, expected: str) -> None:
        assert normalize_ollama_host(value) == expected

    @pytest.mark.parametrize(
        ("value", "expected"),
        [("gpu:8000", "http://gpu:8000/v1"), ("http://gpu:8000/v1/", "http://gpu:8000/v1")],
    )
    def test_vllm_host_forms(self, value: str, expected: str) -> None:
        assert normalize_vllm_host(value) == expected


class TestOverrides:
    def test_base_url_applies_to_the_chosen_engine(self) -> None:
        config = load_config(overrides=EngineOverrides(engine="ollama", base_url="http://o:1"))
        assert config.engine.ollama.host == "http://o:1"

    def test_base_url_without_engine_means_openai_compatible(self) -> None:
        config = load_config(overrides=EngineOverrides(base_url="http://127.0.0.1:9/v1"))
        assert config.engine.name == "openai"
        assert config.engine.openai.base_url == "http://127.0.0.1:9/v1"

    def test_base_url_with_embedded_engine_is_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="llamacpp"):
            load_config(overrides=EngineOverrides(engine="llamacpp", base_url="http://x"))

    def test_unknown_engine_override(self) -> None:
        with pytest.raises(ConfigurationError, match="Known engines"):
            load_config(overrides=EngineOverrides(engine="gpt"))


class TestSchema:
    def test_every_section_validates_its_own_defaults(self) -> None:
        from dataclasses import asdict

        from jarvis.application.config import JarvisConfig, from_data, validate

        defaults = JarvisConfig()
        assert validate(JarvisConfig, asdict(defaults)) == defaults
        assert from_data(JarvisConfig, asdict(defaults)) == defaults

    def test_bounds_are_enforced(self, jarvis_home: Path) -> None:
        write(jarvis_home, "[agent]\ntemperature = 2.5\n[engine]\nmax_retries = 11\n")
        with pytest.raises(ConfigurationError) as info:
            load_config()
        message = str(info.value)
        assert "agent.temperature: Input should be less than or equal to 2" in message
        assert "engine.max_retries: Input should be less than or equal to 10" in message

    def test_lists_become_tuples(self, jarvis_home: Path) -> None:
        write(jarvis_home, '[tools]\nenabled = ["calculator", "think"]\n')
        assert load_config().tools.enabled == ("calculator", "think")

    def test_defaults_and_environment_need_no_pydantic(self, tmp_path: Path) -> None:
        import subprocess
        import sys

        code = (
            "import sys\n"
            "from jarvis.entrypoints.settings import load_config\n"
            f"config = load_config(env={{'OPENJARVIS_HOME': {str(tmp_path)!r}, "
            "'OLLAMA_HOST': 'box'})\n"
            "assert config.engine.ollama.host == 'http://box:11434'\n"
            "print('pydantic' in sys.modules)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == "False"


BAD_URLS = [
    ("http://127.0.0.1:99999/v1", "Port out of range"),
    ("http://[::1/v1", "Invalid IPv6 URL"),
    ("ftp://files.example/v1", "only http:// and https://"),
    ("localhost:8000", "only http:// and https://"),
    ("http:///v1", "names no host"),
    ("http://gpu box:8000/v1", "spaces or control characters"),
    ("http://gpu\x00box/v1", "spaces or control characters"),
    ("http://gpu\udcffbox/v1", "not UTF-8"),
]


class TestUrls:
    """A URL that the HTTP client could not even parse is a usage error naming its source,
    not an exception from deep inside the client on the first request."""

    @pytest.mark.parametrize(("url", "problem"), BAD_URLS)
    def test_a_bad_base_url_option(self, url: str, problem: str) -> None:
        with pytest.raises(ConfigurationError, match="--base-url") as raised:
            load_config(overrides=EngineOverrides(base_url=url))
        assert problem in raised.value.message

    @pytest.mark.parametrize(
        ("variable", "value", "problem"),
        [
            ("OLLAMA_HOST", "gpu-box:70000", "Port out of range"),
            ("OLLAMA_HOST", "[::1", "Invalid IPv6 URL"),
            ("VLLM_HOST", "gpu box", "spaces or control characters"),
            ("OPENAI_BASE_URL", "ftp://llm.example/v1", "only http:// and https://"),
            ("JARVIS_SEARCH_URL", "http://127.0.0.1:123456/search", "Port out of range"),
        ],
    )
    def test_a_bad_url_in_the_environment(
        self, jarvis_home: Path, variable: str, value: str, problem: str
    ) -> None:
        env = {"OPENJARVIS_HOME": str(jarvis_home), variable: value}
        with pytest.raises(ConfigurationError, match=variable) as raised:
            load_config(env=env)
        assert problem in raised.value.message

    @pytest.mark.parametrize(
        "key",
        ["engine.ollama.host", "engine.vllm.base_url", "engine.openai.base_url"],
    )
    def test_a_bad_url_in_the_file(self, jarvis_home: Path, key: str) -> None:
        section, name = key.rsplit(".", 1)
        path = write(jarvis_home, f'[{section}]\n{name} = "http://gpu:99999/v1"\n')
        with pytest.raises(ConfigurationError) as raised:
            load_config()
        assert f"Invalid config file {path}: {key}:" in raised.value.message
        assert "Port out of range" in raised.value.message

    def test_the_message_never_quotes_a_password(self) -> None:
        with pytest.raises(ConfigurationError) as raised:
            load_config(overrides=EngineOverrides(base_url="http://alice:s3cr3t@[::1/v1"))
        assert "s3cr3t" not in str(raised.value)
        assert "http://***@[::1/v1" in raised.value.message

    @pytest.mark.parametrize(
        "url",
        [
            "http://localhost:8000/v1",
            "https://llm.example",
            "http://[::1]:8080/v1",
            "http://10.0.0.2",
        ],
    )
    def test_good_urls_pass(self, url: str) -> None:
        assert load_config(overrides=EngineOverrides(base_url=url)).engine.openai.base_url == url


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than TOML can be read"),
        (".".join(["a"] * 2000) + " = 1\n", "nested more than 32 deep"),
        ("[engine]\n" + "k = " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 deep"),
    ],
    ids=["deep-array", "deep-dotted-key", "deep-in-a-section"],
)
def test_a_file_nested_past_reason_is_a_usage_error(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_config(path)


def test_a_quoted_key_holding_a_dot_is_one_key(tmp_path: Path) -> None:
    """``[memory] "a.b" = 1`` is the key ``a.b`` of [memory] (ignored, as OpenJarvis's
    [memory] keys are here), not a table ``a``."""
    path = tmp_path / "config.toml"
    path.write_text('[memory]\n"a.b" = 1\n')
    load_config(path)
    path.write_text('[intelligence]\n"c.d" = 2\n')
    with pytest.raises(ConfigurationError, match="unknown key"):
        load_config(path)
