"""The SQLite knowledge store and the filesystem document reader pass their contracts."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from contracts.document_reader_contract import Change, DocumentReaderContract, Make
from contracts.knowledge_store_contract import KnowledgeStoreContract
from jarvis.adapters.filesystem_tools.document_files import DocumentFiles
from jarvis.adapters.sqlite_memory import SqliteMemory
from jarvis.domain.ports import DocumentReaderPort


class TestSqliteKnowledgeStore(KnowledgeStoreContract[SqliteMemory]):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteMemory]:
        store = SqliteMemory(str(tmp_path / "memory.db"))
        yield store
        await store.aclose()


@pytest.mark.parametrize("opener", ["auto", "walk"])
class TestDocumentFiles(DocumentReaderContract[DocumentFiles]):
    @pytest.fixture
    def make(self, tmp_path: Path, opener: str) -> Make:
        def build(files: Mapping[str, bytes]) -> tuple[DocumentReaderPort, str]:
            root = tmp_path / "docs"
            for name, data in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(data)
            return DocumentFiles(protected=[], opener=opener), os.path.realpath(root)  # type: ignore[arg-type]

        return build

    @pytest.fixture
    def change(self) -> Change:
        def rewrite(reader: DocumentReaderPort, path: str, data: bytes | None) -> None:
            if data is None:
                os.unlink(path)
            else:
                Path(path).write_bytes(data)

        return rewrite


async def test_words_in_most_chunks_leave_the_query_at_scale(tmp_path: Path) -> None:
    """Past 10,000 chunks a word in more than a tenth of them is left out of the query
    (it would cost a scoring pass over them all for almost no weight); a query of only
    such words is kept whole."""
    from contracts.knowledge_store_contract import chunk, info

    store = SqliteMemory(str(tmp_path / "memory.db"))
    for n in range(120):
        chunks = [chunk(f"common words {n} {i}", i + 1) for i in range(100)]
        await store.replace_source(info(f"/bulk/{n}.txt"), chunks, None)
    await store.replace_source(info("/rare.txt"), [chunk("common narwhal")], None)
    hits = await store.keyword_search("common narwhal", top_k=3)
    assert [h.source for h in hits] == ["/rare.txt"]  # only the rare word was searched
    assert len(await store.keyword_search("common words", top_k=3)) == 3
    await store.aclose()
