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
