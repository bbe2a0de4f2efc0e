"""The container builds the tool catalogue from the configuration."""

from __future__ import annotations

from pathlib import Path

from jarvis.adapters.filesystem_tools import FileReadTool
from jarvis.adapters.httpx_web.web_search import WebSearchTool
from jarvis.adapters.sqlite_memory import SqliteMemory
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.entrypoints.composition import Container, bootstrap
from jarvis.entrypoints.settings import load_config
from jarvis.testing import ScriptedInference

ENGINE = ScriptedInference()


def catalogue_for(config_text: str, home: Path, env: dict[str, str] | None = None) -> Container:
    (home / "config.toml").write_text(config_text)
    config = load_config(env={"OPENJARVIS_HOME": str(home), **(env or {})})
    return bootstrap(config).container


def test_search_provider_from_config_or_environment(jarvis_home: Path) -> None:
    container = catalogue_for("", jarvis_home, {"JARVIS_SEARCH_URL": "http://127.0.0.1:9/s"})
    catalogue = container.tools()
    assert isinstance(catalogue, ToolCatalogue)
    [web] = catalogue.build(["web_search"], inference=ENGINE, model="m")
    assert isinstance(web, WebSearchTool)
    assert web.provider is not None
    assert web.provider.provider_url == "http://127.0.0.1:9/s"
    unset = catalogue_for("", jarvis_home).tools()
    assert isinstance(unset, ToolCatalogue)
    [plain] = unset.build(["web_search"], inference=ENGINE, model="m")
    assert isinstance(plain, WebSearchTool)
    assert plain.provider is None


def test_file_read_roots_and_memory_path(jarvis_home: Path, tmp_path: Path) -> None:
    container = catalogue_for(
        f'[tools.file_read]\nroots = ["{tmp_path}"]\n[tools.retrieval]\ndb_path = "mem/m.db"\n',
        jarvis_home,
    )
    memory = container.memory()
    assert isinstance(memory, SqliteMemory)
    assert memory.path == str(jarvis_home / "mem" / "m.db")
    catalogue = container.tools()
    assert isinstance(catalogue, ToolCatalogue)
    [reader] = catalogue.build(["file_read"], inference=ENGINE, model="m")
    assert isinstance(reader, FileReadTool)
    assert [root.real for root in reader.roots] == [str(tmp_path.resolve())]


async def test_retrieval_searches_the_container_memory(jarvis_home: Path) -> None:
    container = catalogue_for("", jarvis_home)
    memory = container.memory()
    await memory.store("The VPN config lives in the wiki.", source="it.md")
    catalogue = container.tools()
    assert isinstance(catalogue, ToolCatalogue)
    [retrieval] = catalogue.build(["retrieval"], inference=ENGINE, model="m")
    result = await retrieval.execute({"query": "where is the vpn config"})
    assert result.content.startswith("[1] source: it.md")
    assert (jarvis_home / "memory.db").exists()
    assert isinstance(memory, SqliteMemory)
    await memory.aclose()
