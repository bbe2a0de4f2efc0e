"""The behaviour every ``SkillLibrary`` shows (the in-memory fake and the skill folders)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from jarvis.application.skills import SkillError, SkillLibrary

MakeLibrary = Callable[[Mapping[str, str], Mapping[str, Mapping[str, str]]], SkillLibrary]
"""Builds a library from ``{folder: SKILL.md text}`` and ``{folder: {file: text}}``."""

PDF = "---\nname: pdf\ndescription: >\n  Read PDF\n  files.\n---\n# PDF\nUse forms.md.\n"
NOTES = "---\nname: notes\ndescription: 'Take notes.'\n---\nWrite them down.\n"


class SkillLibraryContract:
    """Subclass with a ``make`` fixture returning a :data:`MakeLibrary`."""

    @pytest.fixture
    def make(self) -> MakeLibrary:
        raise NotImplementedError("subclass must provide the `make` fixture")

    def test_skills_are_listed_by_name_with_their_description(self, make: MakeLibrary) -> None:
        library = make({"pdf": PDF, "notes": NOTES}, {})
        found = {skill.name: skill.description for skill in library.skills()}
        assert found == {"pdf": "Read PDF files.", "notes": "Take notes."}

    def test_a_malformed_skill_is_left_out(self, make: MakeLibrary) -> None:
        library = make({"pdf": PDF, "bad": "no front matter\n"}, {})
        assert [skill.name for skill in library.skills()] == ["pdf"]

    def test_reading_a_skill_gives_its_body_and_its_files(self, make: MakeLibrary) -> None:
        library = make({"pdf": PDF}, {"pdf": {"forms.md": "Fill fields.\n"}})
        text = library.read("pdf")
        assert "# PDF\nUse forms.md." in text
        assert "description:" not in text
        assert "forms.md" in text.split("Use forms.md.", 1)[1]
        assert library.read("pdf", "forms.md") == "Fill fields.\n"

    def test_an_unknown_skill_or_file_is_a_skill_error(self, make: MakeLibrary) -> None:
        library = make({"pdf": PDF}, {})
        with pytest.raises(SkillError, match="no skill named"):
            library.read("nope")
        with pytest.raises(SkillError, match="no file"):
            library.read("pdf", "missing.md")

    def test_an_empty_library_has_no_skills(self, make: MakeLibrary) -> None:
        assert list(make({}, {}).skills()) == []
