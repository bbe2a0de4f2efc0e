"""OpenJarvis's names of jarvis's tools, through the real command line: ``memory_search``
and ``memory_retrieve`` (in ``--tools`` or ``[tools] enabled``) are jarvis's ``retrieval``,
searching the memory ``jarvis memory add`` filled (a real SQLite FTS5 database), as
OpenJarvis's search its memory backend; the scripted engine's request log shows what the
model was offered and what the search returned."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_jarvis
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

pytestmark = pytest.mark.integration

NOTE = "The lighthouse keeper's boat is called Marigold."


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    return run_jarvis(*args, timeout=120)  # OPENJARVIS_HOME: this test's own config dir


@pytest.fixture
def remembered(jarvis_home: Path, tmp_path: Path) -> Path:
    """The config dir, its memory holding one note (from outside it: memory add never
    reads jarvis's own config dir)."""
    note = tmp_path / "notes" / "boats.md"
    note.parent.mkdir()
    note.write_text(f"# Boats\n\n{NOTE}\n", encoding="utf-8")
    added = jarvis("memory", "add", str(note), "--no-embed")
    assert added.returncode == 0, added.stderr
    return jarvis_home


@pytest.mark.parametrize(
    ("tools", "enabled", "offered"),
    [
        (["--tools", "memory_search"], None, ["retrieval"]),
        (["--tools", "memory_retrieve,think"], None, ["retrieval", "think"]),
        ([], '["memory_search", "think", "memory_retrieve"]', ["retrieval", "think"]),
        ([], '"memory_retrieve, retrieval"', ["retrieval"]),  # OpenJarvis's comma string
    ],
    ids=["option-search", "option-retrieve", "config-list", "config-string"],
)
def test_openjarvis_memory_tools_are_jarvis_retrieval(
    remembered: Path, tmp_path: Path, tools: list[str], enabled: str | None, offered: list[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[tools]\nenabled = {enabled}\n" if enabled else "")
    call = tool_call("c1", "retrieval", {"query": "lighthouse boat"})
    with ScriptedEngine([Reply(tool_calls=[call]), Reply("Marigold.")]) as engine:
        result = jarvis(
            "ask", "--no-keep", "--config", str(config), "--base-url", engine.url, "-m", MODEL,
            "-a", "orchestrator", *tools, "What is the keeper's boat called?",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        given = engine.requests[0]["tools"]
        assert isinstance(given, list)
        names = [t["function"]["name"] for t in given]
        [answer] = [m for m in engine.messages(1) if m["role"] == "tool"]
    assert sorted(names) == offered
    assert NOTE in str(answer["content"])
    assert "Marigold." in result.stdout
    assert "ignored" not in result.stderr


def test_config_check_says_what_the_openjarvis_names_became(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[tools]\nenabled = ["memory_search", "memory_retrieve", "shell_exec"]\n')
    result = jarvis("config", "check", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert (
        "tools.enabled: read as tools.enabled (memory_search, memory_retrieve: OpenJarvis's "
        "names of retrieval)" in result.stdout
    )
    assert "OpenJarvis tools jarvis does not have: shell_exec)" in result.stdout
