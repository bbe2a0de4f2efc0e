"""OpenJarvis's own configuration files (its ``configs/openjarvis/config.toml`` and
``configs/openjarvis/examples/*.toml``, copied verbatim into
``openjarvis_configs/upstream/``) are read without error, every key accounted for."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from jarvis.application.config import JarvisConfig
from jarvis.application.openjarvis_config import file_keys, note_for
from jarvis.entrypoints.settings import read_config

UPSTREAM = Path(__file__).parent / "openjarvis_configs" / "upstream"
FILES = sorted(UPSTREAM.glob("*.toml"))


def test_the_upstream_files_are_there() -> None:
    assert len(FILES) == 10


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_upstream_config_is_read(path: Path, jarvis_home: Path) -> None:
    loaded = read_config(path, env={"OPENJARVIS_HOME": str(jarvis_home)})
    assert isinstance(loaded.config, JarvisConfig)
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    jarvis_keys = [k for k in file_keys(raw) if note_for(k, loaded.notes) is None]
    # every key not translated or ignored is one of jarvis's own, read as it is
    for key in jarvis_keys:
        node: object = loaded.config
        for part in key.split("."):
            assert hasattr(node, part), key
            node = getattr(node, part)


GUIDE_OLD_FORMS = {
    # docs/getting-started/configuration.md, "Engine: Nested Sub-Sections", "Old Format"
    "engine-old-format": (
        '[engine]\ndefault = "ollama"\nollama_host = "http://localhost:11434"\n'
        'vllm_host = "http://localhost:8000"\nllamacpp_path = "/usr/local/bin/llama-server"\n'
    ),
    # "[tools.storage]": the [memory] section "is still supported and maps to
    # [tools.storage]"; context_injection "is automatically migrated"
    "memory-section": '[memory]\ndb_path = "~/.openjarvis/memory.db"\ncontext_injection = true\n',
    # docs/deployment/api-server.md: "[server.auth].api_key" (jarvis auth create-key)
    "server-auth": (
        '[server]\nhost = "0.0.0.0"\n[server.auth]\napi_key = "oj_sk_0123456789abcdef"\n'
    ),
}


@pytest.mark.parametrize("name", sorted(GUIDE_OLD_FORMS))
def test_the_older_forms_openjarvis_still_accepts_are_read(name: str, jarvis_home: Path) -> None:
    path = jarvis_home / "config.toml"
    path.write_text(GUIDE_OLD_FORMS[name], encoding="utf-8")
    loaded = read_config(path, env={"OPENJARVIS_HOME": str(jarvis_home)})
    config = loaded.config
    if name == "engine-old-format":
        assert config.engine.ollama.host == "http://localhost:11434"
        assert config.engine.vllm.base_url == "http://localhost:8000/v1"
    elif name == "memory-section":
        assert config.tools.retrieval.db_path == "~/.openjarvis/memory.db"
        assert config.agent.context_from_memory is True
    else:
        assert config.server.auth.api_key == "oj_sk_0123456789abcdef"
    for key in file_keys(tomllib.loads(GUIDE_OLD_FORMS[name])):
        assert note_for(key, loaded.notes) is not None or key.split(".")[0] == "server", key


def test_the_scheduled_monitor_searches_memory_with_retrieval(jarvis_home: Path) -> None:
    """Its ``memory_search`` (OpenJarvis's search of its memory backend) is jarvis's
    ``retrieval``; the tools jarvis lacks are left out."""
    path = UPSTREAM / "scheduled-monitor.toml"
    loaded = read_config(path, env={"OPENJARVIS_HOME": str(jarvis_home)})
    assert loaded.config.tools.enabled == ("retrieval", "think", "web_search")
