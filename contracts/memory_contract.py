"""The behaviour every MemoryPort implementation shows (fake and real alike)."""

from __future__ import annotations

from typing import Generic, TypeVar

import pytest

from jarvis.domain.ports import MemoryPort

MemoryT = TypeVar("MemoryT", bound=MemoryPort)

HOSTILE_QUERIES = [
    '"unbalanced',
    'say "hello" AND NOT',
    "NEAR(a b) OR *",
    "content: -x ^y",
    "a AND OR NOT ( )",
    "'; DROP TABLE memories; --",
    "{braces} [brackets] <angles> \\ back",
    "\x00 nul and émoji 🚀",
]


class MemoryContract(Generic[MemoryT]):
    """Subclass with a ``memory`` fixture returning a fresh, empty memory."""

    @pytest.fixture
    def memory(self) -> MemoryT:
        raise NotImplementedError("subclass must provide the `memory` fixture")

    async def test_an_empty_memory_finds_nothing(self, memory: MemoryT) -> None:
        assert await memory.search("anything") == []

    async def test_stored_content_is_found_with_its_source(self, memory: MemoryT) -> None:
        await memory.store("The invoice server listens on port 8443.", source="ops.md")
        await memory.store("Lunch is at noon.", source="calendar")
        hits = await memory.search("which port does the invoice server use")
        assert hits
        assert hits[0].content == "The invoice server listens on port 8443."
        assert hits[0].source == "ops.md"

    async def test_ids_are_unique(self, memory: MemoryT) -> None:
        ids = {await memory.store("same text") for _ in range(5)}
        assert len(ids) == 5
        assert all(isinstance(i, str) and i for i in ids)

    async def test_no_shared_word_means_no_hit(self, memory: MemoryT) -> None:
        await memory.store("apples and pears")
        assert await memory.search("submarine") == []

    async def test_more_matching_words_rank_first(self, memory: MemoryT) -> None:
        await memory.store("kiwi mentioned once with other words here")
        await memory.store("kiwi banana mango: all three fruits")
        await memory.store("banana alone here")
        hits = await memory.search("kiwi banana mango")
        assert hits[0].content == "kiwi banana mango: all three fruits"
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)

    async def test_top_k_bounds_the_hits(self, memory: MemoryT) -> None:
        for i in range(8):
            await memory.store(f"note {i} about zebras")
        assert len(await memory.search("zebras", top_k=3)) == 3
        assert len(await memory.search("zebras", top_k=20)) == 8

    async def test_matching_ignores_case_and_punctuation(self, memory: MemoryT) -> None:
        await memory.store("Deploy with: KUBECTL apply -f app.yaml")
        hits = await memory.search("kubectl?")
        assert [hit.content for hit in hits] == ["Deploy with: KUBECTL apply -f app.yaml"]

    async def test_unicode_text_is_found(self, memory: MemoryT) -> None:
        await memory.store("ร้านกาแฟ café naïve straße")
        assert await memory.search("café")

    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_query_syntax_in_user_text_never_raises(
        self, memory: MemoryT, query: str
    ) -> None:
        await memory.store('say "hello" and content: x NEAR y')
        hits = await memory.search(query)
        assert isinstance(hits, list)

    async def test_quotes_and_operators_are_searched_as_words(self, memory: MemoryT) -> None:
        await memory.store("we must NOT forget the hello world demo")
        hits = await memory.search('"hello" AND')
        assert [hit.content for hit in hits] == ["we must NOT forget the hello world demo"]

    @pytest.mark.parametrize("query", ["", "   ", "?!,.;"])
    async def test_a_query_without_words_finds_nothing(self, memory: MemoryT, query: str) -> None:
        await memory.store("something stored")
        assert await memory.search(query) == []
