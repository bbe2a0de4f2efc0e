"""The knowledge base (``jarvis memory``): its documents' readers, the URL fetcher, and
what the ``retrieval`` tool and memory context search.

The knowledge base lives in the memory database (``[tools.retrieval] db_path``), so that
what ``jarvis memory add`` indexes is what ``retrieval`` and ``--memory`` find. Each adapter
(pypdf, the HTML reducer, httpx, the embedding model) is imported on first use.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from jarvis.application.config import JarvisConfig, MemorySettings
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.knowledge import DocumentError, RawDocument
from jarvis.domain.ports import MemoryPort
from jarvis.entrypoints.composition.skip_optional_imports import import_httpx
from jarvis.entrypoints.composition.stores import embeddings

if TYPE_CHECKING:
    from jarvis.application.knowledge import KnowledgeBase, UrlFetcher
    from jarvis.application.tools.retrieval import MemorySearch


async def document_text(document: RawDocument, settings: MemorySettings) -> str:
    """A document's text: HTML through the web tools' linear-time reducer, PDF through
    pypdf (the ``pdf`` extra, in a child process within ``settings``' limits), anything
    else decoded as UTF-8 (bad bytes replaced)."""
    if document.kind == "pdf":
        from jarvis.adapters.pypdf_documents import PdfLimits, pdf_text

        limits = PdfLimits(
            page_seconds=settings.pdf_page_seconds,
            total_seconds=settings.pdf_file_seconds,
            memory_bytes=settings.pdf_memory_mb * 1024 * 1024,
        )
        return await pdf_text(document.data, document.source, limits=limits)
    text = document.data.decode("utf-8-sig", errors="replace")
    if document.kind == "html":
        from jarvis.adapters.httpx_web.html_text import html_to_text

        title, body = html_to_text(text)
        return f"{title}\n\n{body}" if title and not body.startswith(title) else body
    return text


def url_fetcher(*, allow_private_hosts: bool = False) -> UrlFetcher:
    """``memory add --url``: the web tools' fetcher (public addresses only, every redirect
    checked, size and time bounded); ``allow_private_hosts`` is for tests on loopback."""

    async def fetch(url: str) -> RawDocument:
        import_httpx()
        from jarvis.adapters.httpx_web.page_fetch import FetchRefused, PageFetcher

        try:
            page = await PageFetcher(allow_private_hosts=allow_private_hosts).fetch(url)
        except FetchRefused as refusal:
            raise DocumentError(str(refusal)) from None
        text = f"{page.title}\n\n{page.text}" if page.title else page.text
        return RawDocument(source=url, data=text.encode("utf-8"), kind="text")

    return fetch


def searchable(config: JarvisConfig, memory: MemoryPort) -> MemorySearch:
    """What ``retrieval`` searches: the knowledge base (hybrid) over the SQLite memory, or
    an embedding app's own memory as it is."""
    from jarvis.adapters.sqlite_memory.store import SqliteMemory

    return knowledge_base(config, memory) if isinstance(memory, SqliteMemory) else memory


def knowledge_base(
    config: JarvisConfig, memory: MemoryPort, *, allow_private_hosts: bool = False
) -> KnowledgeBase:
    """``jarvis memory``'s knowledge base in the memory database (``[memory]`` settings)."""
    from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
    from jarvis.adapters.sqlite_memory.store import SqliteMemory
    from jarvis.application.knowledge import ChunkSettings, KnowledgeBase

    if not isinstance(memory, SqliteMemory):
        raise ConfigurationError("This memory backend cannot hold documents.")
    settings = config.memory
    model = embeddings(config) if settings.embed else None
    memory.embedding_model = model.model_id if model is not None else ""
    return KnowledgeBase(
        memory,
        DocumentFiles(max_bytes=settings.max_file_bytes),
        extract=partial(document_text, settings=settings),
        embeddings=lambda: model,
        fetch=url_fetcher(allow_private_hosts=allow_private_hosts),
        chunking=ChunkSettings(max_chars=settings.chunk_chars, overlap=settings.chunk_overlap),
        embed=settings.embed,
    )
