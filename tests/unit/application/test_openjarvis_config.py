"""Reading OpenJarvis's configuration keys (translation, precedence, ignored keys, typos)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jarvis.application.openjarvis_config import ConfigNote, translate
from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.settings import read_config


def load(home: Path, text: str) -> tuple[object, tuple[ConfigNote, ...]]:
    (home / "config.toml").write_text(text, encoding="utf-8")
    loaded = read_config(env={"OPENJARVIS_HOME": str(home)})
    return loaded.config, loaded.notes


def test_openjarvis_names_are_read_with_their_meaning(jarvis_home: Path) -> None:
    (jarvis_home / "prompt.md").write_text("Be brief.\n", encoding="utf-8")
    config, notes = load(
        jarvis_home,
        """
[intelligence]
default_model = "m1"
temperature = 0.3
max_tokens = 99
[engine]
default = "ollama"
[engine.ollama]
host = "http://127.0.0.1:1"
[agent]
default_agent = "orchestrator"
max_turns = 7
tools = "calculator, think"
system_prompt_path = "prompt.md"
[tools]
searxng_url = "http://127.0.0.1:2/search"
file_allowed_directories = ["/srv/a", "/srv/b"]
[tools.storage]
db_path = "/srv/memory.db"
[server]
host = "127.0.0.2"
port = 8123
""",
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.engine.name == "ollama"
    assert config.engine.model == "m1"
    assert config.engine.ollama.host == "http://127.0.0.1:1"
    assert (config.agent.temperature, config.agent.max_tokens) == (0.3, 99)
    assert (config.agent.default, config.agent.max_turns) == ("orchestrator", 7)
    assert config.agent.system_prompt == "Be brief."
    assert config.tools.enabled == ("calculator", "think")
    assert config.tools.web_search.provider_url == "http://127.0.0.1:2/search"
    assert config.tools.file_read.roots == ("/srv/a", "/srv/b")
    assert config.tools.retrieval.db_path == "/srv/memory.db"
    assert (config.server.host, config.server.port) == ("127.0.0.2", 8123)
    assert ConfigNote("agent.default_agent", "read_as", "agent.default") in notes


def test_jarvis_name_wins_over_openjarvis_name() -> None:
    data, notes = translate(
        {
            "engine": {"model": "ours", "name": "vllm", "default": "ollama"},
            "intelligence": {"default_model": "theirs"},
            "agent": {"default": "simple", "default_agent": "orchestrator"},
        }
    )
    assert data["engine"] == {"model": "ours", "name": "vllm"}
    assert data["agent"] == {"default": "simple"}
    assert ConfigNote("intelligence.default_model", "overridden", "engine.model") in notes
    assert ConfigNote("engine.default", "overridden", "engine.name") in notes


def test_translation_does_not_modify_the_parsed_file() -> None:
    raw: dict[str, object] = {"intelligence": {"default_model": "m"}}
    translate(raw)
    assert raw == {"intelligence": {"default_model": "m"}}


def test_engine_without_adapter_is_ignored_not_fatal(jarvis_home: Path) -> None:
    config, notes = load(
        jarvis_home, '[engine]\ndefault = "cloud"\n[engine.cloud]\nkey = "x"\n[engine.tpu9]\nx=1\n'
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.engine.name == "auto"
    kinds = {note.key: note.kind for note in notes}
    assert kinds == {
        "engine.default": "ignored",
        "engine.cloud": "ignored",
        "engine.tpu9": "ignored",
    }


def test_openai_compatible_engine_becomes_the_openai_engine() -> None:
    data, _ = translate({"engine": {"default": "sglang", "sglang": {"host": "http://h:30000"}}})
    assert data["engine"] == {"name": "openai", "openai": {"base_url": "http://h:30000/v1"}}
    data, _ = translate({"engine": {"default": "exo"}})
    assert data["engine"] == {"name": "openai", "openai": {"base_url": "http://localhost:52415/v1"}}


def test_openjarvis_sandbox_image_is_not_used() -> None:
    data, notes = translate({"sandbox": {"image": "openjarvis-sandbox:latest", "timeout": 60}})
    assert data["sandbox"] == {"timeout": 60}
    assert notes[0].key == "sandbox.image"


def test_mcp_tables_are_kept_typed(jarvis_home: Path) -> None:
    config, notes = load(
        jarvis_home,
        '[tools.mcp]\nenabled = false\nservers = "[]"\n'
        '[mcp.servers.git]\ncommand = "uvx"\nargs = ["mcp-server-git"]\n',
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.tools.mcp is not None
    assert (config.tools.mcp.enabled, config.tools.mcp.servers) == (False, "[]")
    assert config.mcp is not None
    git = config.mcp.servers["git"]
    assert (git.command, git.args) == ("uvx", ("mcp-server-git",))
    assert {n.kind for n in notes} == {"passed_through"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[engine]\ntimout = 1\n", "engine.timout: unknown key (did you mean engine.timeout?)"),
        ("[agnet]\nmax_turns = 1\n", "agnet: unknown key (did you mean agent?)"),
        ("[learning]\n[telemtry]\nx = 1\n", "telemtry: unknown key (did you mean telemetry?)"),
        ("[tools.storage]\ndb_pth = 'x'\n", "tools.storage.db_pth: unknown key (did you mean"),
        ("[server]\nprot = 1\n", "server.prot: unknown key (did you mean server.port?)"),
    ],
)
def test_key_in_neither_vocabulary_is_refused(jarvis_home: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, text)
    assert expected in str(info.value)


def test_unreadable_system_prompt_file_is_a_configuration_error(jarvis_home: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"agent\.system_prompt_path"):
        load(jarvis_home, '[agent]\nsystem_prompt_path = "missing.md"\n')


def test_a_system_prompt_file_that_is_a_secret_is_never_read(jarvis_home: Path) -> None:
    """A config copied from elsewhere must not send a key with every question."""
    keys = jarvis_home / ".ssh"
    keys.mkdir()
    (keys / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (jarvis_home / "prompt.md").symlink_to(keys / "id_ed25519")  # nor through a link
    for named in (".ssh/id_ed25519", "prompt.md"):
        with pytest.raises(ConfigurationError) as info:
            load(jarvis_home, f'[agent]\nsystem_prompt_path = "{named}"\n')
        assert "is a secret file (it matches '.ssh')" in str(info.value)
        assert "PRIVATE KEY" not in str(info.value)


def test_a_system_prompt_in_a_secret_folder_reached_through_a_link_is_refused(
    jarvis_home: Path,
) -> None:
    """``~/.config`` kept by a dotfile manager is a link: checked as written too."""
    real = jarvis_home / "dotfiles" / "config" / "gcloud"
    real.mkdir(parents=True)
    (real / "token.json").write_text('{"refresh_token": "1//SECRET"}')
    (jarvis_home / ".config").symlink_to(jarvis_home / "dotfiles" / "config")
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, '[agent]\nsystem_prompt_path = ".config/gcloud/token.json"\n')
    assert "it matches '.config/gcloud'" in str(info.value)


def test_the_cli_knows_the_operative_agents() -> None:
    from jarvis.domain.operators import OPERATIVE_AGENTS
    from jarvis.entrypoints.cli.ask import OPERATIVE_KEYS

    assert set(OPERATIVE_KEYS) == set(OPERATIVE_AGENTS)


def test_openjarvis_only_tools_are_left_out_of_the_default_tools(jarvis_home: Path) -> None:
    """OpenJarvis's code-assistant example lists tools jarvis does not have."""
    config, notes = load(
        jarvis_home,
        '[tools]\nenabled = ["code_interpreter", "file_read", "file_write", "shell_exec", '
        '"web_search", "think", "calculator"]\n[engine.ollama]\nhost = ""\n',
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.tools.enabled == (
        "code_interpreter",
        "file_read",
        "web_search",
        "think",
        "calculator",
    )
    assert config.engine.ollama.host == "http://localhost:11434"
    described = [note.describe() for note in notes]
    assert (
        "tools.enabled: ignored (in part: OpenJarvis tools jarvis does not have: "
        "file_write, shell_exec)" in described
    )


def test_an_openjarvis_only_default_agent_is_ignored(jarvis_home: Path) -> None:
    """OpenJarvis's deep-research example names an agent jarvis does not have."""
    config, notes = load(jarvis_home, '[agent]\ndefault_agent = "deep_research"\nmax_turns = 8\n')
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert (config.agent.default, config.agent.max_turns) == ("simple", 8)
    assert [n.key for n in notes if n.kind == "ignored"] == ["agent.default_agent"]
