"""The skill folders on disk pass the skill library contract, with either way of opening
files beneath a folder (``openat2`` and the component walk)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from contracts.skill_library_contract import MakeLibrary, SkillLibraryContract
from contracts.tool_contract import ToolContract
from jarvis.adapters.filesystem_tools.beneath import Strategy
from jarvis.adapters.filesystem_tools.skill_folders import SkillFolders
from jarvis.adapters.inotify_watch import InotifyWatch
from jarvis.application.skills import SkillLibrary
from jarvis.application.tools.skill import SkillTool
from jarvis.domain.json_types import JSONObject


class TestSkillFolders(SkillLibraryContract):
    @pytest.fixture(params=["auto", "walk", "watched"])
    def make(self, tmp_path: Path, request: pytest.FixtureRequest) -> MakeLibrary:
        strategy: Strategy = "auto" if request.param == "watched" else request.param
        watch = InotifyWatch() if request.param == "watched" else None
        notices: list[str] = []

        def build(
            skills: Mapping[str, str], files: Mapping[str, Mapping[str, str]]
        ) -> SkillLibrary:
            root = tmp_path / "skills"
            for folder, text in skills.items():
                (root / folder).mkdir(parents=True)
                (root / folder / "SKILL.md").write_text(text)
                for name, content in files.get(folder, {}).items():
                    (root / folder / name).write_text(content)
            library = SkillFolders([str(root)], notice=notices.append, opener=strategy, watch=watch)
            library.skills()
            library.skills()  # kept from here on, until a file changes
            return library

        return build


def test_a_notice_names_each_malformed_file_once(tmp_path: Path) -> None:
    bad = tmp_path / "skills" / "bad"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: bad\n---\n")
    notices: list[str] = []
    library = SkillFolders([str(tmp_path / "skills")], notice=notices.append)
    assert library.skills() == []
    assert library.skills() == []
    assert notices == [
        f"jarvis: notice: skill {bad / 'SKILL.md'} skipped: its front matter has no 'description'"
    ]


def test_an_oversized_or_undecodable_skill_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "big").mkdir(parents=True)
    (root / "big" / "SKILL.md").write_text("---\nname: big\ndescription: x\n---\n" + "y" * 70_000)
    (root / "latin").mkdir()
    (root / "latin" / "SKILL.md").write_bytes(b"---\nname: l\ndescription: caf\xe9\n---\n")
    notices: list[str] = []
    assert SkillFolders([str(root)], notice=notices.append).skills() == []
    assert any("big" in n and "bytes (at most 65536)" in n for n in notices)
    assert any("latin" in n and "not UTF-8" in n for n in notices)


def test_a_linked_skill_folder_is_read_and_the_first_of_a_name_wins(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "pdf"
    shared.mkdir(parents=True)
    (shared / "SKILL.md").write_text("---\nname: pdf\ndescription: shared\n---\nshared body\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pdf").symlink_to(shared, target_is_directory=True)
    other = tmp_path / "other" / "pdf"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text("---\nname: pdf\ndescription: other\n---\nother\n")
    library = SkillFolders([str(project), str(tmp_path / "other")])
    assert [s.description for s in library.skills()] == ["shared"]
    assert "shared body" in library.read("pdf")


class TestSkillToolOverTheFolders(ToolContract[SkillTool]):
    @pytest.fixture
    def tool(self, tmp_path: Path) -> SkillTool:
        folder = tmp_path / "skills" / "greet"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greet.\n---\nSay hi.\n")
        return SkillTool(SkillFolders([str(tmp_path / "skills")]))

    @pytest.fixture
    def valid_arguments(self) -> JSONObject:
        return {"name": "greet"}

    @pytest.fixture
    def failing_arguments(self) -> JSONObject | None:
        return {"name": "greet", "file": "../../etc/passwd"}
