"""Reading OpenJarvis's configuration keys (translation, precedence, ignored keys, typos)."""

from __future__ import annotations

import os
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


def test_a_system_prompt_file_that_is_not_a_regular_file_is_named_as_its_key(
    jarvis_home: Path,
) -> None:
    """A FIFO or a folder is refused before it is opened, worded as every other error of
    the config file."""
    os.mkfifo(jarvis_home / "pipe.md")
    (jarvis_home / "folder.md").mkdir()
    for named, kind in (("pipe.md", "a named pipe"), ("folder.md", "a directory")):
        with pytest.raises(ConfigurationError) as info:
            load(jarvis_home, f'[agent]\nsystem_prompt_path = "{named}"\n')
        assert info.value.message == (
            f"Invalid config file {jarvis_home / 'config.toml'}: agent.system_prompt_path: "
            f"the prompt file '{jarvis_home / named}' is {kind}, not a regular file."
        )


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


def test_openjarvis_flat_engine_keys_are_read_as_the_nested_ones(jarvis_home: Path) -> None:
    """The "Old Format" of OpenJarvis's configuration guide, which it still accepts."""
    config, notes = load(
        jarvis_home,
        '[engine]\ndefault = "ollama"\nollama_host = "http://localhost:11434"\n'
        'vllm_host = "http://localhost:8000"\nllamacpp_path = "/usr/local/bin/llama-server"\n'
        'sglang_host = "http://localhost:30000"\n',
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.engine.name == "ollama"
    assert config.engine.ollama.host == "http://localhost:11434"
    assert config.engine.vllm.base_url == "http://localhost:8000/v1"
    described = {note.describe() for note in notes}
    assert described == {
        "engine.default: read as engine.name",
        "engine.ollama_host: read as engine.ollama.host",
        "engine.vllm_host: read as engine.vllm.base_url",
        "engine.llamacpp_path: ignored (jarvis's llamacpp engine is embedded: it starts no "
        "llama.cpp server)",
        "engine.sglang_host: ignored (not the engine in use)",
    }


@pytest.mark.parametrize(
    "name", ["sglang", "llamacpp", "mlx", "lmstudio", "exo", "nexa", "apple_fm", "lemonade"]
)
def test_a_flat_host_of_the_default_engine_is_its_server(name: str) -> None:
    data, notes = translate({"engine": {"default": name, f"{name}_host": "http://h:1"}})
    assert data["engine"] == {"name": "openai", "openai": {"base_url": "http://h:1/v1"}}
    assert ConfigNote(f"engine.{name}_host", "read_as", "engine.openai.base_url") in notes


def test_the_nested_engine_key_wins_over_the_flat_one() -> None:
    data, notes = translate(
        {
            "engine": {
                "ollama_host": "http://flat:1",
                "nexa_host": "http://flat:2",
                "ollama": {"host": "http://nested:1"},
                "nexa": {"device": "gpu"},
            }
        }
    )
    assert data["engine"] == {"ollama": {"host": "http://nested:1"}}
    assert ConfigNote("engine.ollama_host", "overridden", "engine.ollama.host") in notes
    # the file's own [engine.nexa] is ignored with the flat key moved into it
    assert ConfigNote("engine.nexa", "ignored", "not the engine in use") in notes
    assert ConfigNote("engine.nexa_host", "ignored", "not the engine in use") in notes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[engine]\ndefault = ["ollama"]\n',
            'engine.default: must be an engine\'s name, such as "ollama", not an array',
        ),
        ("[engine]\ndefault = 3\n", "engine.default: must be an engine's name"),
        ('[engine]\nname = "vllm"\ndefault = {a = 1}\n', "not a table"),
        (
            "[engine]\nollama_host = 11434\n",
            "engine.ollama_host: must be a URL (a string), not a number",
        ),
        ("[engine]\nllamacpp_path = true\n", "engine.llamacpp_path: must be a path (a string)"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(jarvis_home: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, text)
    assert expected in str(info.value)
    assert "Invalid config file" in str(info.value)


def test_an_error_names_the_key_the_file_holds(jarvis_home: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, '[engine]\ndefault = "lmstudio"\nlmstudio_host = "ftp://x"\n')
    assert "engine.lmstudio_host (read as engine.openai.base_url): 'ftp://x/v1'" in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, '[agent]\ntools = ["calculator", 3]\n')
    assert "agent.tools (read as tools.enabled.1): Input should be a valid string" in str(
        info.value
    )


def test_context_injection_is_read_as_context_from_memory(jarvis_home: Path) -> None:
    """OpenJarvis moves it to [agent] context_from_memory: [memory]'s first, and never
    over an [agent] context_from_memory the file sets."""
    config, notes = load(
        jarvis_home,
        "[memory]\ncontext_injection = true\n[tools.storage]\ncontext_injection = false\n",
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.agent.context_from_memory is True
    read = next(n for n in notes if n.key == "memory.context_injection")
    assert read.describe().startswith(
        "memory.context_injection: read as agent.context_from_memory; jarvis's default is off, "
        "OpenJarvis's on:"
    )
    assert (
        ConfigNote("tools.storage.context_injection", "overridden", "memory.context_injection")
        in notes
    )
    config, notes = load(
        jarvis_home,
        "[tools.storage]\ncontext_injection = true\n[agent]\ncontext_from_memory = false\n",
    )
    assert isinstance(config, JarvisConfig)
    assert config.agent.context_from_memory is False
    assert [n.kind for n in notes] == ["overridden"]
    config, _ = load(jarvis_home, "[tools.storage]\ncontext_injection = true\n")
    assert isinstance(config, JarvisConfig)
    assert config.agent.context_from_memory is True
    assert JarvisConfig().agent.context_from_memory is False  # jarvis's default stays off


def test_memory_db_path_is_the_knowledge_base_as_tools_storage_db_path_is(
    jarvis_home: Path,
) -> None:
    """``[memory]`` is OpenJarvis's older name of ``[tools.storage]``, applied after it;
    jarvis's own [memory] keys beside it keep their meaning."""
    config, notes = load(
        jarvis_home,
        '[memory]\ndb_path = "/srv/old.db"\nchunk_chars = 500\ndefault_backend = "faiss"\n'
        '[tools.storage]\ndb_path = "/srv/new.db"\n',
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.tools.retrieval.db_path == "/srv/old.db"
    assert config.memory.chunk_chars == 500
    assert ConfigNote("memory.db_path", "read_as", "tools.retrieval.db_path") in notes
    assert ConfigNote("tools.storage.db_path", "overridden", "memory.db_path") in notes
    assert [n.key for n in notes if n.kind == "ignored"] == ["memory.default_backend"]
    config, _ = load(jarvis_home, '[memory]\ndb_path = "/srv/old.db"\n')
    assert isinstance(config, JarvisConfig)
    assert config.tools.retrieval.db_path == "/srv/old.db"


def test_openjarvis_names_of_retrieval_are_read_as_retrieval() -> None:
    data, notes = translate(
        {"tools": {"enabled": ["memory_search", "think", "memory_retrieve", "retrieval", 3]}}
    )
    assert data == {"tools": {"enabled": ["retrieval", "think", 3]}}  # 3: for validation
    assert [n.describe() for n in notes] == [
        "tools.enabled: read as tools.enabled (memory_search, memory_retrieve: OpenJarvis's "
        "names of retrieval)"
    ]
    data, notes = translate({"agent": {"tools": "memory_retrieve, shell_exec"}})
    assert data == {"tools": {"enabled": ["retrieval"]}}
    assert [n.describe() for n in notes] == [
        "agent.tools: read as tools.enabled",
        "agent.tools: read as tools.enabled (memory_retrieve: OpenJarvis's name of retrieval)",
        "agent.tools: ignored (in part: OpenJarvis tools jarvis does not have: shell_exec)",
    ]


def test_a_tool_list_with_only_openjarvis_tools_is_ignored_whole() -> None:
    data, notes = translate({"tools": {"enabled": ["shell_exec", "memory_store", "shell_exec"]}})
    assert "tools" not in data
    assert [n.describe() for n in notes] == [
        "tools.enabled: ignored (OpenJarvis tools jarvis does not have: shell_exec; "
        "memory_store: the operative agents always have their own; so no tool is enabled by "
        "default)"
    ]
    _, notes = translate({"agent": {"tools": "memory_store, calculator"}})
    assert (
        ConfigNote(
            "agent.tools",
            "ignored",
            "in part: memory_store: the operative agents always have their own",
        )
        in notes
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[agent]\nmax_tokens = 99999999\n", "at most 1048576)"),
        ("[tools]\nenabled = 5\n", "tools.enabled: Input should be a TOML array"),
        ('agent = "simple"\n', "agent: Input should be a table"),
        ("[server]\ncors_origins = '*'\n", "server.cors_origins: Input should be a TOML array"),
        ("[tools.approval]\ntools = 5\n", "tools.approval.tools: Input should be a table"),
    ],
)
def test_messages_say_what_a_toml_file_writes(jarvis_home: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, text)
    message = str(info.value)
    assert expected in message
    for internal in ("e+", "tuple", "instance of", "Settings", "dictionary"):
        assert internal not in message


def test_long_names_and_values_are_cut_in_messages(jarvis_home: Path) -> None:
    long = "x" * 200_000
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, f"[{long}]\na = 1\n")
    assert len(info.value.message) < 400
    assert "xxx...: unknown key" in str(info.value)
    _, notes = load(jarvis_home, f'[engine]\ndefault = "{long}"\n')
    assert len(notes[0].describe()) < 200
    _, notes = load(jarvis_home, f'[tools.approval.tools]\n"{long}" = "ask"\n')
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, f'[tools.approval.tools]\n"{long}" = "bad"\n')
    assert len(info.value.message) < 400
    with pytest.raises(ConfigurationError) as info:
        load(jarvis_home, "".join(f"bad{n} = 1\n" for n in range(5000)))
    assert len(info.value.message) < 400
    assert "; and 4990 more" in str(info.value)


def test_the_serve_key_of_the_file_is_read_and_never_shown(jarvis_home: Path) -> None:
    secret = "oj_sk_" + "s3cret" * 5
    config, notes = load(
        jarvis_home, f'[server]\nhost = "0.0.0.0"\n[server.auth]\napi_key = "{secret}"\n'
    )
    from jarvis.application.config import JarvisConfig

    assert isinstance(config, JarvisConfig)
    assert config.server.auth.api_key == secret
    assert notes == ()
    assert secret not in repr(config)
    for text in (
        f'[server.auth]\napi_kye = "{secret}"\n',
        f'[server]\nauth = "{secret}"\n',
        f'[server.auth]\napi_key = ["{secret}"]\n',
    ):
        with pytest.raises(ConfigurationError) as info:
            load(jarvis_home, text)
        assert secret not in str(info.value) + (info.value.hint or "")
