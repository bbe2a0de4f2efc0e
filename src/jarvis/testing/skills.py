"""An in-memory ``SkillLibrary``: skills given as text, for tests of what agents are offered."""

from __future__ import annotations

from collections.abc import Mapping

from jarvis.application.skills import Skill, SkillError, SkillFormatError, parse_skill


class InMemorySkills:
    """``{folder: SKILL.md text}`` and ``{folder: {file: text}}``; ``read`` returns what the
    folder-backed library returns for the same files (instructions, then the file list)."""

    def __init__(
        self,
        skills: Mapping[str, str],
        files: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._texts = dict(skills)
        self._files = {name: dict(found) for name, found in (files or {}).items()}

    def skills(self) -> list[Skill]:
        found: list[Skill] = []
        for key, text in self._texts.items():
            try:
                parsed = parse_skill(text)
            except SkillFormatError:
                continue  # skipped, as the folders skip a malformed SKILL.md
            found.append(
                Skill(
                    name=parsed.name,
                    description=parsed.description,
                    folder=f"memory://{key}",
                    source=f"memory://{key}/SKILL.md",
                )
            )
        return found

    def read(self, name: str, file: str | None = None) -> str:
        skill = next((s for s in self.skills() if s.name == name), None)
        if skill is None:
            raise SkillError(f"no skill named {name!r}")
        key = skill.folder.removeprefix("memory://")
        files = self._files.get(key, {})
        if file is None:
            body = parse_skill(self._texts[key]).body
            listing = (
                "\n\nFiles in this skill (read one with the `file` argument): "
                + ", ".join(sorted(files))
                if files
                else ""
            )
            return f"Skill '{name}' ({skill.folder}):\n\n{body}{listing}"
        if file not in files:
            raise SkillError(f"no file '{file}' in skill '{name}'")
        return files[file]
