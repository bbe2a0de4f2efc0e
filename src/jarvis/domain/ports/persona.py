"""The persona files (SOUL, MEMORY, USER) and where they live."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class PersonaFile(StrEnum):
    """The three persona files, in the order they enter the system prompt."""

    SOUL = "soul"
    MEMORY = "memory"
    USER = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonaDocument:
    """The text of one persona file as read at the start of a conversation.

    A file that was refused (binary, a symlink leading out of its folder, not a regular
    file) is reported with empty ``text`` and a warning saying why, so the user can be told.
    A file too large to read whole is read at its two ends only: ``text`` is its beginning
    followed by its end, ``omitted_at`` is the index in ``text`` where the unread middle
    was, and ``omitted_bytes`` how many bytes of the file were not read (0 = read whole).
    """

    kind: PersonaFile
    text: str
    source: str
    warnings: tuple[str, ...] = ()
    omitted_bytes: int = 0
    omitted_at: int = 0


class PersonaStorePort(Protocol):
    """Where SOUL.md, MEMORY.md and USER.md live (the default set and named personas)."""

    def load(self, persona: str | None) -> tuple[PersonaDocument, ...]:
        """Read the persona's files now (no cache), in SOUL, MEMORY, USER order.

        ``None`` means the default files. A name selects ``personas/<name>/``; a name that
        is empty, contains ``/``, ``\\`` or ``..``, or has no folder raises ``PersonaError``
        whose hint lists the existing personas. Missing files and files that are empty (or
        only whitespace) are left out. Undecodable bytes are replaced and warned about;
        refused files come back with empty text and a warning. Never raises for the
        content of a file.
        """
        ...

    def names(self) -> list[str]:
        """The named personas that exist, sorted."""
        ...

    def location(self, kind: PersonaFile, persona: str | None = None) -> str:
        """Where the ``kind`` file of the default set (or of persona ``persona``) lives,
        whether or not it exists. Raises ``PersonaError`` like :meth:`load` for a bad name.
        """
        ...

    def ensure(self, kind: PersonaFile) -> str:
        """Create the default ``kind`` file, empty, unless it exists; return its location.

        Raises ``PersonaError`` naming the place when it cannot be created.
        """
        ...

    def edit(self, kind: PersonaFile, change: Callable[[str], str]) -> str:
        """Atomically replace the default ``kind`` file with ``change(current_text)``.

        Writers are serialised (a lock that also holds across processes) and the write is
        atomic (temp file + fsync + rename), so concurrent editors never lose an entry or
        see a torn file. ``change`` sees the whole current text ("" when the file is
        missing); returning it unchanged writes nothing, and an exception from ``change``
        propagates with nothing written. Returns the resulting text.

        Raises ``PersonaError``, with every file left as it was, when the file cannot be
        edited safely: the place is not writable, the file is binary, not UTF-8, too large
        to rewrite whole, or a symlink leading out of its folder. Named personas are never
        edited through this method.
        """
        ...
