"""The persona part of every agent's system prompt: SOUL, MEMORY and USER sections.

The agent's own template (its protocol instructions) always comes first and is supplied by
the agent; :class:`SystemPromptBuilder` produces what is appended after it:
"## Agent Persona" (SOUL.md), "## Agent Memory" (MEMORY.md), "## User Profile" (USER.md),
then any catalogue section passed in. The files are read through the persona store at
every call, so an edit applies to the next conversation without a restart. Each file is
cut to its character budget, keeping its head and its tail (where the newest memory
entries are) around a visible marker, so one runaway file cannot crowd out the question.

The section boundaries cannot be forged by what the files say: MEMORY.md and USER.md are
written by the model itself (through the persona tools), so a line in them that reads like
a heading (``## User Profile``, or a ``===``/``---`` underline) is escaped with a backslash,
the Markdown way (``\\## User Profile`` shows as the plain text it is). The escape is applied
to each file before it is cut and again to the line the cut exposes after the marker, so a
cut in the middle of a line cannot make one either: the prompt holds exactly the builder's
own headings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from jarvis.application.config import MemoryFilesSettings, SystemPromptSettings
from jarvis.domain.errors import PersonaError
from jarvis.domain.persona import NO_PERSONA
from jarvis.domain.ports import PersonaDocument, PersonaFile, PersonaStorePort

HEADINGS: dict[PersonaFile, str] = {
    PersonaFile.SOUL: "## Agent Persona",
    PersonaFile.MEMORY: "## Agent Memory",
    PersonaFile.USER: "## User Profile",
}
HEAD_SHARE = 0.7
TAIL_SHARE = 0.2
HEAD_ONLY_SHARE = 0.9

_log = logging.getLogger("jarvis.persona")


def budget_of(settings: SystemPromptSettings, kind: PersonaFile) -> int:
    """The character budget of ``kind``'s section."""
    return {
        PersonaFile.SOUL: settings.soul_max_chars,
        PersonaFile.MEMORY: settings.memory_max_chars,
        PersonaFile.USER: settings.user_max_chars,
    }[kind]


def read_limit_bytes(settings: SystemPromptSettings) -> int:
    """How many bytes of a persona file a store should read at most: enough for the
    largest budget in 4-byte characters, at both ends, with room to spare."""
    largest = max(budget_of(settings, kind) for kind in PersonaFile)
    return max(64 * 1024, 16 * largest)


@dataclass(frozen=True, slots=True, kw_only=True)
class CutText:
    """A file's text cut to its budget."""

    text: str
    kept_chars: int
    cut_chars: int = 0
    unread_bytes: int = 0

    @property
    def truncated(self) -> bool:
        return bool(self.cut_chars or self.unread_bytes)


def truncation_marker(cut_chars: int, unread_bytes: int = 0) -> str:
    """The visible marker put where text was cut out."""
    if unread_bytes:
        return f"\n\n[...truncated {cut_chars} chars and {unread_bytes} unread bytes...]\n\n"
    return f"\n\n[...truncated {cut_chars} chars...]\n\n"


def _escaped_line(line: str) -> str:
    body = line.lstrip()
    content = body.rstrip()
    underline = bool(content) and (set(content) == {"="} or set(content) == {"-"})
    if body.startswith("#") or underline:
        return line[: len(line) - len(body)] + "\\" + body
    return line


def escape_headings(text: str) -> str:
    """``text`` with a backslash before every line that a reader could take for a heading:
    one starting (after blanks) with ``#``, or a ``===``/``---`` underline. Lines end where
    :meth:`str.splitlines` says (``\\r``, U+2028... included); the rest is unchanged."""
    if "#" not in text and "=" not in text and "-" not in text:
        return text
    return "".join(_escaped_line(line) for line in text.splitlines(keepends=True))


def _escaped_first_line(text: str) -> str:
    """``text`` with its first line escaped (the line a cut put at a line start)."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    return _escaped_line(lines[0]) + text[len(lines[0]) :]


def _looks_like_heading(line: str) -> bool:
    return _escaped_line(line) != line


def _without_heading_at_end(head: str) -> str:
    """``head`` (a kept beginning, cut mid-line) whose last, partial line no longer reads as
    a heading: the cut can leave ``=`` of ``= x`` or ``--`` of ``--x``, an underline that
    would turn the line before it into a heading. Such a line loses its last character and
    is escaped, so the kept text does not grow."""
    lines = head.splitlines(keepends=True)
    if not lines or not _looks_like_heading(lines[-1]):
        return head
    last = lines[-1][:-1]
    if _looks_like_heading(last):
        last = _escaped_line(last)
    return head[: len(head) - len(lines[-1])] + last


def cut_to_budget(document: PersonaDocument, budget: int, strategy: str = "head_tail") -> CutText:
    """``document``'s text within ``budget`` characters (plus the marker, when cut).

    ``head_tail`` keeps the first 70 % and the last 20 % of the budget; ``head`` keeps the
    first 90 %. A document read at its two ends only (a huge file) is always marked, and its
    marker also counts the bytes that were never read. Lines that look like headings are
    escaped (see the module docstring); the budget counts the escaped text.
    """
    unread = document.omitted_bytes
    if strategy == "head":
        head_n, tail_n = int(budget * HEAD_ONLY_SHARE), 0
    else:
        head_n, tail_n = int(budget * HEAD_SHARE), int(budget * TAIL_SHARE)
    if unread:  # two separate pieces: the file's beginning and its end
        head = escape_headings(document.text[: document.omitted_at].lstrip())
        tail = escape_headings(document.text[document.omitted_at :].rstrip())
        kept_head = _without_heading_at_end(head[:head_n])
        kept_tail = tail[max(0, len(tail) - tail_n) :] if tail_n else ""
        cut = len(head) - len(kept_head) + len(tail) - len(kept_tail)
    else:
        text = escape_headings(document.text.strip())
        if len(text) <= budget:
            return CutText(text=text, kept_chars=len(text))
        kept_head = _without_heading_at_end(text[:head_n])
        kept_tail = text[len(text) - tail_n :] if tail_n else ""
        cut = len(text) - len(kept_head) - len(kept_tail)
    marker = truncation_marker(cut, unread)
    return CutText(
        text=kept_head.rstrip() + marker + _escaped_first_line(kept_tail.lstrip()),
        kept_chars=len(kept_head) + len(kept_tail),
        cut_chars=cut,
        unread_bytes=unread,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SectionReport:
    """How one persona file entered the prompt (for ``jarvis persona show``)."""

    kind: PersonaFile
    heading: str
    source: str
    budget: int
    present: bool
    """False when the file is missing or empty (then it adds nothing)."""
    file_chars: int = 0
    used_chars: int = 0
    cut_chars: int = 0
    unread_bytes: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return bool(self.cut_chars or self.unread_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonaPromptReport:
    """The assembled persona prompt and the budget use of each section."""

    persona: str | None
    """The persona used: ``None`` = the default files, ``"none"`` = no persona, or a name."""
    prompt: str
    sections: tuple[SectionReport, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for section in self.sections for w in section.warnings)


class SystemPromptBuilder:
    """Builds the persona sections for a persona selection; it is a ``PersonaPrompt``.

    A selection of ``None`` uses the configured ``persona_name`` ("" = the default files),
    ``"none"`` injects nothing, any other string names ``personas/<name>/`` (an invalid or
    unknown name raises ``PersonaError`` listing the existing personas).
    """

    def __init__(
        self,
        store: PersonaStorePort,
        settings: SystemPromptSettings | None = None,
        memory_files: MemoryFilesSettings | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or SystemPromptSettings()
        self.default_persona = (memory_files or MemoryFilesSettings()).persona_name
        self._last: tuple[tuple[object, ...], PersonaPromptReport] | None = None
        """The last report and what it was built from: the files are read again for every
        run (an edit counts at once), but a report is built again only when they changed."""

    def __call__(self, selection: str | None) -> str:
        """The persona prompt for ``selection``; file warnings go to the ``jarvis.persona``
        logger (shown by ``--verbose``)."""
        return self.build(selection)

    def build(self, selection: str | None = None, *, catalogue: str = "") -> str:
        report = self.report(selection, catalogue=catalogue)
        for warning in report.warnings:
            _log.warning("%s", warning)
        return report.prompt

    def resolve(self, selection: str | None) -> str | None:
        """The persona a selection means: ``None`` (default files), ``"none"`` or a name."""
        chosen = self.default_persona if selection is None else selection
        if selection is None and not chosen:
            return None
        return chosen

    def report(self, selection: str | None = None, *, catalogue: str = "") -> PersonaPromptReport:
        """The prompt for ``selection`` and how each file entered it."""
        return self.report_for(
            self.resolve(selection), catalogue=catalogue, from_config=selection is None
        )

    def report_for(
        self, persona: str | None, *, catalogue: str = "", from_config: bool = False
    ) -> PersonaPromptReport:
        """Like :meth:`report` for a persona already resolved: ``None`` = the default files
        (whatever ``persona_name`` says)."""
        if persona == NO_PERSONA:
            return PersonaPromptReport(persona=NO_PERSONA, prompt="", sections=())
        documents = self._load(persona, from_config=from_config)
        key = (persona, catalogue, documents)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        report = self._build_report(persona, catalogue, documents)
        self._last = (key, report)
        return report

    def _build_report(
        self, persona: str | None, catalogue: str, documents: tuple[PersonaDocument, ...]
    ) -> PersonaPromptReport:
        by_kind = {document.kind: document for document in documents}
        sections: list[SectionReport] = []
        parts: list[str] = []
        for kind in PersonaFile:
            budget = budget_of(self.settings, kind)
            document = by_kind.get(kind)
            if document is None or not document.text.strip():
                sections.append(
                    SectionReport(
                        kind=kind,
                        heading=HEADINGS[kind],
                        source=document.source if document else self._location(kind, persona),
                        budget=budget,
                        present=False,
                        warnings=document.warnings if document else (),
                    )
                )
                continue
            cut = cut_to_budget(document, budget, self.settings.truncation_strategy)
            parts.append(f"{HEADINGS[kind]}\n\n{cut.text}")
            sections.append(
                SectionReport(
                    kind=kind,
                    heading=HEADINGS[kind],
                    source=document.source,
                    budget=budget,
                    present=True,
                    file_chars=len(document.text.strip()),
                    used_chars=cut.kept_chars,
                    cut_chars=cut.cut_chars,
                    unread_bytes=cut.unread_bytes,
                    warnings=document.warnings,
                )
            )
        if catalogue.strip():
            parts.append(catalogue.strip())
        return PersonaPromptReport(
            persona=persona, prompt="\n\n".join(parts), sections=tuple(sections)
        )

    def _load(self, persona: str | None, *, from_config: bool) -> tuple[PersonaDocument, ...]:
        try:
            return self.store.load(persona)
        except PersonaError as error:
            if not from_config:
                raise
            raise PersonaError(
                f"The configured persona ([memory_files] persona_name = {persona!r}) cannot "
                f"be used: {error.message}",
                hint=error.hint,
            ) from None

    def _location(self, kind: PersonaFile, persona: str | None) -> str:
        return self.store.location(kind, persona)
