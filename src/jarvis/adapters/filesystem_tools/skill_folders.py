"""Agent Skills found in folders: each ``<location>/<skill>/SKILL.md`` is one skill.

The locations are searched in order and the first skill of a name wins. A location that does
not exist costs one ``scandir`` that fails. A skill's folder may be a symbolic link (a shared
skill linked into a project); it is resolved once, and everything read of the skill is then
opened beneath that folder without following any link (:mod:`.beneath`), so ``..``, an
absolute path or a link inside the skill cannot reach anything else. Files are read up to a
bound (``SKILL.md``: :data:`~jarvis.application.skills.MAX_SKILL_BYTES`; other files:
:data:`~jarvis.application.skills.MAX_SKILL_FILE_BYTES`), never executed.

A ``SKILL.md`` that cannot be used (no front matter, no name, too large, undecodable) is
skipped, and ``notice`` is called once per file and reason with a line naming it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final

from jarvis.adapters.inotify_watch import InotifyWatch, KeptReading, Read
from jarvis.application.skills import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILE_BYTES,
    MAX_SKILLS,
    Skill,
    SkillError,
    SkillFormatError,
    parse_skill,
)

if TYPE_CHECKING:  # imported on first use (ctypes): a folder with no skills never needs it
    from jarvis.adapters.filesystem_tools.beneath import BeneathOpener, Strategy

SKILL_FILE: Final = "SKILL.md"
MAX_LISTED_FILES: Final = 100
MAX_LIST_DEPTH: Final = 3


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _read_descriptor(descriptor: int, limit: int) -> bytes:
    """The whole regular file behind ``descriptor`` if it holds at most ``limit`` bytes."""
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raise IsADirectoryError("not a regular file")
    if info.st_size > limit:
        raise _TooLarge(info.st_size)
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(descriptor, 65536):
        total += len(chunk)
        if total > limit:  # grew while being read
            raise _TooLarge(total)
        chunks.append(chunk)
    return b"".join(chunks)


class SkillFolders:
    """The skills in ``locations`` (a ``SkillLibrary``), read from disk at every call, or
    with ``watch`` kept until a file or folder they were read from changes."""

    def __init__(
        self,
        locations: Sequence[str],
        *,
        notice: Callable[[str], None] | None = None,
        opener: Strategy = "auto",
        watch: InotifyWatch | None = None,
    ) -> None:
        self.locations = tuple(os.path.abspath(os.path.expanduser(p)) for p in locations)
        self._notice = notice
        self._noticed: set[str] = set()
        self._opener_strategy: Strategy = opener
        self._opener: BeneathOpener | None = None
        self._kept = KeptReading(self._read_all, watch)

    @property
    def opener(self) -> BeneathOpener:
        if self._opener is None:
            from jarvis.adapters.filesystem_tools.beneath import BeneathOpener

            self._opener = BeneathOpener(self._opener_strategy)
        return self._opener

    def _tell(self, message: str) -> None:
        if self._notice is not None and message not in self._noticed:
            self._noticed.add(message)
            self._notice(message)

    def skills(self) -> list[Skill]:
        return list(self._kept(None))

    def _read_all(self, _key: None) -> Read[tuple[Skill, ...]]:
        """Every location's skills, and what they were read from: each location (listed
        whole) and each entry's ``SKILL.md`` (the watch follows the links on the way)."""
        found: dict[str, Skill] = {}
        paths: list[str] = []
        for location in self.locations:
            for skill in self._scan(location, paths):
                found.setdefault(skill.name, skill)
        return Read(tuple(found.values()), (*self.locations, *paths), self.locations)

    def _scan(self, location: str, paths: list[str]) -> Iterator[Skill]:
        try:
            entries = sorted(
                (e.name for e in os.scandir(location) if not e.name.startswith(".")),
            )
        except OSError:  # missing, not a folder, unreadable: no skills there
            return
        from jarvis.adapters.filesystem_tools.beneath import LinkRefused

        if len(entries) > MAX_SKILLS:
            self._tell(
                f"jarvis: notice: only the first {MAX_SKILLS} of {len(entries)} entries of "
                f"{location} are read as skills"
            )
        for entry in entries[:MAX_SKILLS]:
            folder = os.path.realpath(os.path.join(location, entry))
            paths.append(os.path.join(location, entry, SKILL_FILE))  # links followed there
            if not os.path.isdir(folder):
                continue
            source = os.path.join(location, entry, SKILL_FILE)
            try:
                descriptor = self.opener.open(folder, [SKILL_FILE])
            except FileNotFoundError:
                continue  # a folder without SKILL.md is not a skill
            except (LinkRefused, OSError):
                self._skipped(source, "it is a symbolic link or cannot be opened")
                continue
            try:
                data = _read_descriptor(descriptor, MAX_SKILL_BYTES)
                parsed = parse_skill(data.decode("utf-8"))
            except _TooLarge as large:
                self._skipped(source, f"it is {large.size} bytes (at most {MAX_SKILL_BYTES})")
                continue
            except UnicodeDecodeError:
                self._skipped(source, "it is not UTF-8 text")
                continue
            except SkillFormatError as error:
                self._skipped(source, str(error))
                continue
            except OSError as error:
                self._skipped(source, error.strerror or "it cannot be read")
                continue
            finally:
                os.close(descriptor)
            yield Skill(
                name=parsed.name, description=parsed.description, folder=folder, source=source
            )

    def _skipped(self, source: str, why: str) -> None:
        self._tell(f"jarvis: notice: skill {source} skipped: {why}")

    def _find(self, name: str) -> Skill:
        for skill in self.skills():
            if skill.name == name:
                return skill
        raise SkillError(
            f"no skill named {name[:80]!r}; the skills are listed under 'Available Skills'"
        )

    def read(self, name: str, file: str | None = None) -> str:
        skill = self._find(name)
        if file is None:
            text = self._read_file(skill, [SKILL_FILE], SKILL_FILE, MAX_SKILL_BYTES)
            try:
                body = parse_skill(text).body
            except SkillFormatError as error:
                raise SkillError(f"skill '{skill.name}' cannot be read: {error}") from None
            others = [f for f in self.files(skill) if f != SKILL_FILE]
            listing = (
                "\n\nFiles in this skill (read one with the `file` argument): " + ", ".join(others)
                if others
                else ""
            )
            return f"Skill '{skill.name}' ({skill.folder}):\n\n{body}{listing}"
        components = self._components(file)
        return self._read_file(skill, components, file, MAX_SKILL_FILE_BYTES)

    @staticmethod
    def _components(file: str) -> list[str]:
        if "\x00" in file or len(file) > 1024:
            raise SkillError("invalid file name")
        if os.path.isabs(file) or file.startswith("~"):
            raise SkillError(f"'{file[:200]}' is absolute; give a path inside the skill's folder")
        parts = [p for p in file.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts:
            raise SkillError("give a file of the skill, not its folder")
        if ".." in parts:
            raise SkillError(f"'{file[:200]}' leaves the skill's folder ('..' is refused)")
        from jarvis.application.tools.secret_paths import secret_rule

        rule = secret_rule(parts)
        if rule is not None:
            raise SkillError(f"'{file[:200]}' is a secret or credential file (rule '{rule}')")
        return parts

    def _read_file(self, skill: Skill, components: list[str], given: str, limit: int) -> str:
        from jarvis.adapters.filesystem_tools.beneath import LinkRefused

        try:
            descriptor = self.opener.open(skill.folder, components)
        except LinkRefused:
            raise SkillError(
                f"'{given[:200]}' is or passes through a symbolic link; skill files are read "
                "only inside the skill's folder, without following links"
            ) from None
        except FileNotFoundError:
            raise SkillError(f"no file '{given[:200]}' in skill '{skill.name}'") from None
        except OSError as error:
            raise SkillError(f"cannot open '{given[:200]}': {error.strerror}") from None
        try:
            data = _read_descriptor(descriptor, limit)
        except _TooLarge as large:
            raise SkillError(
                f"'{given[:200]}' is {large.size} bytes; skill files are read up to {limit}"
            ) from None
        except IsADirectoryError:
            raise SkillError(f"'{given[:200]}' is not a regular file") from None
        finally:
            os.close(descriptor)
        if b"\x00" in data[:8192]:
            raise SkillError(f"'{given[:200]}' is a binary file")
        return data.decode("utf-8", errors="replace")

    def files(self, skill: Skill) -> list[str]:
        """The skill's files (relative paths, links and hidden files left out), bounded."""
        found: list[str] = []

        def walk(folder: str, prefix: str, depth: int) -> None:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                return
            for entry in entries:
                if len(found) >= MAX_LISTED_FILES:
                    return
                if entry.name.startswith(".") or entry.is_symlink():
                    continue
                relative = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_LIST_DEPTH:
                        walk(entry.path, relative + "/", depth + 1)
                elif entry.is_file(follow_symlinks=False):
                    found.append(relative)

        walk(skill.folder, "", 1)
        return found
