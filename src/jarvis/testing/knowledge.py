"""``InMemoryKnowledgeStore`` and ``InMemoryDocuments``: the knowledge base's store and its
document reader, in dictionaries."""

from __future__ import annotations

import fnmatch
import math
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jarvis.application.tools.secret_paths import secret_rule
from jarvis.domain.knowledge import (
    Chunk,
    ChunkVectors,
    DocumentBatch,
    DocumentError,
    DocumentRefusal,
    FoundDocument,
    KnowledgeStats,
    RawDocument,
    SourceInfo,
    check_vectors,
    kind_of,
    looks_binary,
)
from jarvis.domain.run.contract import MemoryHit
from jarvis.testing.memory import words


@dataclass(frozen=True, slots=True)
class _Entry:
    info: SourceInfo
    chunks: tuple[Chunk, ...]
    vectors: tuple[tuple[float, ...], ...] | None


class InMemoryKnowledgeStore:
    """Sources in a dict; keyword hits ranked by shared-word count, vectors by cosine."""

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}

    async def fingerprint(self, source: str) -> str | None:
        entry = self.entries.get(source)
        return None if entry is None else entry.info.fingerprint

    async def replace_source(
        self, info: SourceInfo, chunks: Sequence[Chunk], vectors: ChunkVectors | None
    ) -> None:
        check_vectors(chunks, vectors)
        kept = None if vectors is None else tuple(tuple(v) for v in vectors)
        self.entries[info.source] = _Entry(replace_chunks(info, len(chunks)), tuple(chunks), kept)

    async def remove_source(self, source: str) -> bool:
        return self.entries.pop(source, None) is not None

    async def sources(self) -> list[SourceInfo]:
        return [self.entries[s].info for s in sorted(self.entries)]

    async def stats(self) -> KnowledgeStats:
        chunks = [c for e in self.entries.values() for c in e.chunks]
        embedded = sum(len(e.chunks) for e in self.entries.values() if e.vectors)
        return KnowledgeStats(
            sources=len(self.entries),
            chunks=len(chunks),
            embedded_chunks=embedded,
            text_bytes=sum(len(c.text.encode()) for c in chunks),
            database_bytes=0,
            location=":memory:",
        )

    def _hit(self, source: str, chunk: Chunk, score: float) -> MemoryHit:
        return MemoryHit(
            content=chunk.text, source=source, score=score, line=chunk.line, end_line=chunk.end_line
        )

    async def keyword_search(self, query: str, *, top_k: int) -> list[MemoryHit]:
        wanted = set(words(query))
        if not wanted or top_k <= 0:
            return []
        scored: list[tuple[float, int, MemoryHit]] = []
        for source in self.entries:
            for chunk in self.entries[source].chunks:
                score = sum(1 for w in words(chunk.text) if w in wanted)
                if score:
                    scored.append((score, len(scored), self._hit(source, chunk, float(score))))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [hit for _, _, hit in scored[:top_k]]

    async def vector_search(self, vector: Sequence[float], *, top_k: int) -> list[MemoryHit]:
        scored: list[tuple[float, int, MemoryHit]] = []
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        for source, entry in self.entries.items():
            for chunk, stored in zip(entry.chunks, entry.vectors or (), strict=False):
                length = math.sqrt(sum(x * x for x in stored)) or 1.0
                cosine = sum(a * b for a, b in zip(vector, stored, strict=True)) / norm / length
                scored.append((cosine, len(scored), self._hit(source, chunk, cosine)))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [hit for _, _, hit in scored[: max(0, top_k)]]


def replace_chunks(info: SourceInfo, chunks: int) -> SourceInfo:
    return SourceInfo(
        source=info.source,
        fingerprint=info.fingerprint,
        kind=info.kind,
        chunks=chunks,
        size_bytes=info.size_bytes,
        added_at=info.added_at,
    )


class InMemoryDocuments:
    """Files in a dict of absolute POSIX paths to bytes; folders are the paths' prefixes.
    Applies the secret-name and size rules when it collects and, with the binary rule,
    again when it loads: ``files`` may change in between, as a disk's files can."""

    def __init__(self, files: Mapping[str, bytes], *, max_bytes: int = 10 * 1024 * 1024) -> None:
        self.files = dict(files)
        self.max_bytes = max_bytes

    def _listed(self, path: str) -> str | None:
        """Why ``path`` is refused by what a listing tells: its name and its size."""
        rule = secret_rule(path.split("/"))
        if rule is not None:
            return f"a secret or credential file (rule '{rule}')"
        size = len(self.files[path])
        if size > self.max_bytes:
            return f"{size} bytes, over the {self.max_bytes}-byte limit"
        return None

    def _check(self, path: str) -> str | None:
        if path not in self.files:
            return "no such file or folder"
        why, data = self._listed(path), self.files[path]
        if why is None and looks_binary(data) and not data.startswith(b"%PDF-"):
            why = "a binary file"
        return why

    def _found(self, path: str, *, pattern: str, recursive: bool) -> list[str] | None:
        """The files a folder ``path`` holds that ``pattern`` matches; ``None``: no folder."""
        prefix = path.rstrip("/") + "/"
        below = sorted(p for p in self.files if p.startswith(prefix))
        if not below:
            return None
        return [
            p
            for p in below
            if (recursive or "/" not in p[len(prefix) :])
            and fnmatch.fnmatchcase(posixpath.basename(p), pattern)
        ]

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        found: list[FoundDocument] = []
        refused: list[DocumentRefusal] = []
        for given in paths:
            path = posixpath.normpath(given)
            if path in self.files:
                files: list[tuple[str, str | None]] = [(path, given)]
            else:
                below = self._found(path, pattern=pattern, recursive=recursive)
                if below is None:
                    refused.append(
                        DocumentRefusal(
                            source=given, reason="no such file or folder", explicit=True
                        )
                    )
                    continue
                files = [(p, None) for p in below]
            for file, named in files:
                why = self._listed(file)
                if why is not None:
                    refused.append(
                        DocumentRefusal(
                            source=file if named is None else named,
                            reason=why,
                            explicit=named is not None,
                        )
                    )
                else:
                    found.append(FoundDocument(source=file, kind=kind_of(file), named=named))
        return DocumentBatch(found=tuple(found), refused=tuple(refused))

    def load(self, found: FoundDocument) -> RawDocument | DocumentRefusal:
        why = self._check(found.source)
        if why is not None:
            return DocumentRefusal(
                source=found.source if found.named is None else found.named,
                reason=why,
                explicit=found.named is not None,
            )
        return RawDocument(source=found.source, data=self.files[found.source], kind=found.kind)

    def read(self, source: str) -> RawDocument | None:
        if source not in self.files:
            return None
        why = self._check(source)
        if why is not None:
            raise DocumentError(f"{source} is {why}.")
        return RawDocument(source=source, data=self.files[source], kind=kind_of(source))
