"""The knowledge base's in-memory fakes pass the contracts the real adapters pass."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from contracts.document_reader_contract import Change, DocumentReaderContract, Make
from contracts.knowledge_store_contract import KnowledgeStoreContract
from jarvis.domain.ports import DocumentReaderPort
from jarvis.testing import InMemoryDocuments, InMemoryKnowledgeStore


class TestInMemoryKnowledgeStore(KnowledgeStoreContract[InMemoryKnowledgeStore]):
    @pytest.fixture
    def store(self) -> InMemoryKnowledgeStore:
        return InMemoryKnowledgeStore()


class TestInMemoryDocuments(DocumentReaderContract[InMemoryDocuments]):
    @pytest.fixture
    def make(self) -> Make:
        def build(files: Mapping[str, bytes]) -> tuple[DocumentReaderPort, str]:
            return InMemoryDocuments({f"/docs/{k}": v for k, v in files.items()}), "/docs"

        return build

    @pytest.fixture
    def change(self) -> Change:
        def rewrite(reader: DocumentReaderPort, path: str, data: bytes | None) -> None:
            assert isinstance(reader, InMemoryDocuments)
            if data is None:
                del reader.files[path]
            else:
                reader.files[path] = data

        return rewrite
