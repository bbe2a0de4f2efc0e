"""The user's own knowledge base: documents cut into chunks, each kept with where it came
from, so a search hit can be cited as ``[source:line]`` and a changed file can replace
exactly its own chunks.

A *source* is what was added: an absolute file path or a URL. Its *fingerprint* is the
hash of its bytes: a source added again with the same fingerprint costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

from jarvis.domain.errors import ConfigurationError, JarvisError

SearchMode = Literal["keyword", "semantic", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("keyword", "semantic", "hybrid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One searchable piece of a source: lines ``line``..``end_line`` (1-based, inclusive)."""

    text: str
    line: int
    end_line: int
    content_hash: str
    """The SHA-256 of ``text`` (hex)."""


ChunkVectors: TypeAlias = Sequence[Sequence[float]]
"""A source's embedding vectors: one per chunk, in the chunks' order."""


def check_vectors(chunks: Sequence[Chunk], vectors: ChunkVectors | None) -> None:
    """Refuse vectors that are not one per chunk (a ``ValueError``: the caller's bug),
    before a store changes anything."""
    if vectors is not None and len(vectors) != len(chunks):
        raise ValueError(f"{len(vectors)} vectors for {len(chunks)} chunks")


@dataclass(frozen=True, slots=True, kw_only=True)
class RawDocument:
    """A source's bytes as read (bounded), before its text is extracted."""

    source: str
    data: bytes
    kind: str
    """``text``, ``markdown``, ``code``, ``html`` or ``pdf``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FoundDocument:
    """A file to add, found and checked by its name and its listing but not read: its bytes
    are read only when its turn to be indexed comes, so adding a folder of any size holds
    one file's bytes at a time."""

    source: str
    """Its absolute path."""
    kind: str
    named: str | None = None
    """The path as the user wrote it when they named this file (not found in a folder):
    failing to add it is then an error, reported under that name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceInfo:
    """An indexed source: its fingerprint, how many chunks it has and when it was added."""

    source: str
    fingerprint: str
    kind: str
    chunks: int
    size_bytes: int
    added_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeStats:
    sources: int
    chunks: int
    embedded_chunks: int
    text_bytes: int
    database_bytes: int
    location: str
    embedding_model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentRefusal:
    """A path or URL that was not read, and why (for the user, who can fix it)."""

    source: str
    reason: str
    explicit: bool
    """The user named it (a refusal is then an error); else it was found in a folder."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentBatch:
    """What a collect found to add (none of it read yet) and what it refused already."""

    found: tuple[FoundDocument, ...]
    refused: tuple[DocumentRefusal, ...]


_MARKDOWN = (".md", ".markdown", ".mdx")
_HTML = (".html", ".htm", ".xhtml")
_CODE = (
    ".py",
    ".pyi",
    ".js",
    ".mjs",
    ".ts",
    ".tsx",
    ".jsx",
    ".go",
    ".rs",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".java",
    ".kt",
    ".rb",
    ".php",
    ".cs",
    ".swift",
    ".scala",
    ".sh",
    ".bash",
    ".zsh",
    ".sql",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
    ".ini",
    ".cfg",
    ".css",
    ".lua",
    ".r",
)


def kind_of(name: str) -> str:
    """The kind of document a file name says: ``markdown``, ``html``, ``pdf``, ``code`` or
    ``text`` (anything else that is not binary)."""
    lowered = name.lower()
    if lowered.endswith(_MARKDOWN):
        return "markdown"
    if lowered.endswith(_HTML):
        return "html"
    if lowered.endswith(".pdf"):
        return "pdf"
    if lowered.endswith(_CODE):
        return "code"
    return "text"


BINARY_PROBE = 8192


def looks_binary(data: bytes) -> bool:
    """Whether ``data`` is not text: a NUL byte in its first 8 kB, or more than a tenth of
    them not UTF-8 (a Latin-1 text has a few such bytes; an image or an archive most).
    A PDF is binary here; the reader lets it through by its signature."""
    probe = data[:BINARY_PROBE]
    if b"\x00" in probe:
        return True
    decoded = probe.decode("utf-8", errors="replace")
    if len(probe) == BINARY_PROBE:
        decoded = decoded[:-2]  # a character cut by the probe's end
    return decoded.count("\ufffd") * 10 > max(len(decoded), 1)


class MemoryStoreDamagedError(JarvisError):
    """The memory database cannot be read as one (not SQLite, or damaged); left untouched."""


class MemoryStoreBusyError(JarvisError):
    """Another process held the memory database's lock past the wait; nothing was changed."""

    retryable: ClassVar[bool] = True


class DocumentError(ConfigurationError):
    """A document the user named cannot be added (missing, binary, too large, refused)."""
