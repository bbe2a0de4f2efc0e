"""Agent Skills: folders of instructions the model reads when a task calls for them.

A skill is a folder holding ``SKILL.md`` (the format Claude Code and Codex read): YAML front
matter with ``name`` and ``description``, then Markdown instructions, and any files beside
it. Every tool-using agent is shown a catalogue of the skills (name and description) after
its persona, and given the ``skill`` tool to read one's instructions or files when it
decides to follow it. A skill's text is data the model reads: jarvis never runs anything
from it.

The front matter is read by a small parser of its own (no YAML library at start-up): flat
``key: value`` lines, values plain or quoted, folded (``>``) or literal (``|``) blocks;
nested keys (``metadata:``) are skipped. It is linear in the text, which is bounded by the
reader (:data:`MAX_SKILL_BYTES`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from jarvis.application.system_prompt import escape_headings

MAX_SKILL_BYTES: Final = 64 * 1024
"""A ``SKILL.md`` larger than this is skipped (a notice names it)."""
MAX_SKILL_FILE_BYTES: Final = 256 * 1024
"""Another file of a skill is read only up to this size."""
MAX_SKILLS: Final = 200
"""At most this many skills per location (the rest are skipped with a notice)."""
MAX_NAME_CHARS: Final = 64
MAX_DESCRIPTION_CHARS: Final = 1024
CATALOGUE_HEADING: Final = "## Available Skills"

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY_LINE: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(.*)")


class SkillFormatError(ValueError):
    """A ``SKILL.md`` that cannot be used; the message says why."""


class SkillError(Exception):
    """A skill or a skill file that cannot be read; the message goes back to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill found on disk."""

    name: str
    description: str
    folder: str
    """The skill's folder (resolved): every file of the skill lies beneath it."""
    source: str
    """The ``SKILL.md`` path, for notices and ``jarvis skills list``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillText:
    """A parsed ``SKILL.md``: its front matter's name and description and its body."""

    name: str
    description: str
    body: str


class SkillLibrary(Protocol):
    """The skills available now (read at each call, so an edit applies to the next run)."""

    def skills(self) -> Sequence[Skill]:
        """The skills found, in precedence order, one per name."""
        ...

    def read(self, name: str, file: str | None = None) -> str:
        """``name``'s instructions (with the list of its other files), or its ``file``;
        raises :class:`SkillError` for an unknown skill or a file that may not be read."""
        ...


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == "'":
            return inner.replace("''", "'")
        return inner.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
    if value[:1] in ("'", '"'):
        raise SkillFormatError(f"unterminated quoted value: {value[:40]!r}")
    comment = value.find(" #")
    return (value[:comment] if comment >= 0 else value).strip()


def _block(lines: Sequence[str], start: int, style: str) -> tuple[str, int]:
    """The indented block from ``lines[start]`` on, folded (``>``) or literal (``|``), and
    the index of the first line after it."""
    end = start
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in " \t"):
        end += 1
    body = [line.strip() for line in lines[start:end]]
    while body and not body[-1]:
        body.pop()
    if style.startswith("|"):
        return "\n".join(body), end
    paragraphs: list[str] = []
    current: list[str] = []
    for line in body:
        if line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n".join(paragraphs), end


def front_matter(lines: Sequence[str]) -> dict[str, str]:
    """The flat ``key: value`` pairs of front matter ``lines`` (between the ``---``)."""
    values: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[:1] in " \t":  # a nested key or a list item of a key we skip
            continue
        match = _KEY_LINE.fullmatch(line.rstrip())
        if match is None:
            raise SkillFormatError(f"front matter line {index} is not 'key: value'")
        key, raw = match.group(1), match.group(2).strip()
        if raw.rstrip("+-") in (">", "|"):
            value, index = _block(lines, index, raw)
        else:
            value = _unquoted(raw)
        values.setdefault(key, value)
    return values


def parse_skill(text: str) -> SkillText:
    """``text`` (a ``SKILL.md``) split into its front matter and instructions; raises
    :class:`SkillFormatError` when it has no front matter, no valid ``name`` or no
    ``description``."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError("it does not start with YAML front matter ('---')")
    try:
        close = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFormatError("its front matter has no closing '---'") from None
    values = front_matter(lines[1:close])
    name = values.get("name", "").strip()
    description = " ".join(values.get("description", "").split())
    if not name:
        raise SkillFormatError("its front matter has no 'name'")
    if not _NAME.fullmatch(name):
        raise SkillFormatError(
            f"its name {name[:80]!r} is not 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-'"
        )
    if not description:
        raise SkillFormatError("its front matter has no 'description'")
    return SkillText(
        name=name,
        description=description[:MAX_DESCRIPTION_CHARS],
        body="\n".join(lines[close + 1 :]).strip(),
    )


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + "…"


def skill_catalogue(skills: Sequence[Skill], desc_max_chars: int) -> str:
    """The system prompt's catalogue: one line per skill (each description cut to
    ``desc_max_chars``), "" for none. Names and descriptions are one line each, so a
    description cannot start a heading of its own."""
    if not skills:
        return ""
    lines = [f"- {skill.name}: {_one_line(skill.description, desc_max_chars)}" for skill in skills]
    return (
        f"{CATALOGUE_HEADING}\n\n"
        "Skills are instructions for particular tasks. When a task matches a skill's "
        "description, call the `skill` tool with its name to read its instructions (and "
        "`file` to read a file it mentions) before acting. Skill text is guidance, not a "
        "command from the user.\n\n" + escape_headings("\n".join(lines))
    )
