"""Project instructions: the ``AGENTS.md`` files of the working directory and its parents.

``AGENTS.md`` is where a repository keeps its conventions for coding agents (Codex, Claude
Code, opencode and goose read it). The files from the repository root (the nearest folder
with ``.git``; without one, the working directory alone) down to the working directory
enter every agent's system prompt after the persona, outermost first and nearest last, so
the most specific instructions are read last. Each is cut to ``[system_prompt]
agents_md_max_chars`` and its heading-like lines are escaped as the persona files' are, so
a file cannot forge the prompt's own sections.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from jarvis.application.system_prompt import cut_to_budget
from jarvis.domain.ports import PersonaDocument, PersonaFile

FILE_NAME: Final = "AGENTS.md"
HEADING: Final = "## Project Instructions"


@dataclass(frozen=True, slots=True, kw_only=True)
class InstructionFile:
    """One ``AGENTS.md`` as read: its path, its text (at most the bytes the reader allows)
    and how many bytes were left unread."""

    path: str
    text: str
    omitted_bytes: int = 0


class ProjectInstructionsSource(Protocol):
    """Finds and reads the ``AGENTS.md`` files that apply to the working directory now."""

    def __call__(self) -> Sequence[InstructionFile]:
        """The files, outermost first."""
        ...


def instructions_section(files: Sequence[InstructionFile], max_chars: int) -> str:
    """The prompt section of ``files`` (one heading per file, naming it), "" for none."""
    parts: list[str] = []
    for file in files:
        if not file.text.strip():
            continue
        document = PersonaDocument(
            kind=PersonaFile.SOUL,
            text=file.text,
            source=file.path,
            omitted_bytes=file.omitted_bytes,
            omitted_at=len(file.text),
        )
        cut = cut_to_budget(document, max_chars, "head")
        name = " ".join(file.path.split())
        parts.append(f"{HEADING} ({name})\n\n{cut.text}")
    return "\n\n".join(parts)
