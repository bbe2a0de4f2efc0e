"""The in-memory skill library passes the skill library contract."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from contracts.skill_library_contract import MakeLibrary, SkillLibraryContract
from jarvis.application.skills import SkillLibrary
from jarvis.testing.skills import InMemorySkills


class TestInMemorySkills(SkillLibraryContract):
    @pytest.fixture
    def make(self) -> MakeLibrary:
        def build(
            skills: Mapping[str, str], files: Mapping[str, Mapping[str, str]]
        ) -> SkillLibrary:
            return InMemorySkills(skills, files)

        return build
