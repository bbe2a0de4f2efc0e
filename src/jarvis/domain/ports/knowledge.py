"""The user's knowledge base (``jarvis memory``): its store and what reads the documents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from jarvis.domain.knowledge import (
    Chunk,
    ChunkVectors,
    DocumentBatch,
    DocumentRefusal,
    FoundDocument,
    KnowledgeStats,
    RawDocument,
    SourceInfo,
)
from jarvis.domain.run.contract import MemoryHit


class KnowledgeStorePort(Protocol):
    """The user's knowledge base: sources cut into chunks, searchable by words (bm25) and by
    meaning (stored sentence vectors). Every method raises
    :class:`~jarvis.domain.knowledge.MemoryStoreDamagedError` when the store cannot be read,
    or :class:`~jarvis.domain.knowledge.MemoryStoreBusyError` when another process held it
    past the wait, and then makes no change of its own."""

    async def fingerprint(self, source: str) -> str | None:
        """The fingerprint ``source`` was indexed with; ``None`` when it is not indexed."""
        ...

    async def replace_source(
        self, info: SourceInfo, chunks: Sequence[Chunk], vectors: ChunkVectors | None
    ) -> None:
        """Make ``chunks`` (with ``vectors``, one per chunk, or none) the only chunks of
        ``info.source``, in one transaction: a reader sees the old chunks or the new."""
        ...

    async def remove_source(self, source: str) -> bool:
        """Forget ``source`` and its chunks; ``False`` when it was not indexed."""
        ...

    async def sources(self) -> list[SourceInfo]:
        """Every indexed source, sorted by name."""
        ...

    async def stats(self) -> KnowledgeStats:
        """How much is indexed."""
        ...

    async def keyword_search(self, query: str, *, top_k: int) -> list[MemoryHit]:
        """Chunks sharing words with ``query`` (query syntax is plain text), best first."""
        ...

    async def vector_search(self, vector: Sequence[float], *, top_k: int) -> list[MemoryHit]:
        """The chunks whose vectors are nearest ``vector`` (cosine), best first."""
        ...


class DocumentReaderPort(Protocol):
    """Reads what the user asks to add to the knowledge base, under the same rules as the
    ``file_read`` tool: no secret files, no symbolic links, regular files with one name,
    bounded in size; binary files are refused.

    Adding is two steps so that memory does not grow with the folder: :meth:`collect` finds
    and checks the files without reading them, then each is read by :meth:`load` just
    before it is indexed, and dropped after. What was checked when it was found is checked
    again when it is read: the file may have grown, changed or been swapped for a link."""

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        """The files at ``paths`` (files, or folders: their files matching ``pattern``,
        below too when ``recursive``), none of them read, and what was refused already
        with why: whatever the names and the listing tell (secrets, links, not regular,
        too large, too many files, missing)."""
        ...

    def load(self, found: FoundDocument) -> RawDocument | DocumentRefusal:
        """``found``'s bytes, read now under every rule; else why not (``explicit`` when
        the user named it, under the name they gave), a file gone since it was found too."""
        ...

    def read(self, source: str) -> RawDocument | None:
        """``source`` (an absolute path) read again; ``None`` when it no longer exists.
        Raises :class:`~jarvis.domain.knowledge.DocumentError` when it is refused."""
        ...
