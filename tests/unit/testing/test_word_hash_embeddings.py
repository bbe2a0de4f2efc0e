"""The shipped embedding fake passes the embedding contract."""

from __future__ import annotations

import pytest

from contracts.embedding_contract import EmbeddingContract
from jarvis.testing.embeddings import WordHashEmbeddings


class TestWordHashEmbeddings(EmbeddingContract[WordHashEmbeddings]):
    @pytest.fixture
    def embeddings(self) -> WordHashEmbeddings:
        return WordHashEmbeddings()
