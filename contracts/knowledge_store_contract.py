"""The behaviour every KnowledgeStorePort shows (the in-memory fake and SQLite alike)."""

from __future__ import annotations

from typing import Generic, TypeVar

import pytest

from contracts.memory_contract import HOSTILE_QUERIES
from jarvis.domain.knowledge import Chunk, SourceInfo
from jarvis.domain.ports import KnowledgeStorePort

StoreT = TypeVar("StoreT", bound=KnowledgeStorePort)


def chunk(text: str, line: int = 1) -> Chunk:
    return Chunk(text=text, line=line, end_line=line + text.count("\n"), content_hash=f"h{line}")


def info(source: str, fingerprint: str = "f1", chunks: int = 0) -> SourceInfo:
    return SourceInfo(
        source=source,
        fingerprint=fingerprint,
        kind="text",
        chunks=chunks,
        size_bytes=10,
        added_at=1.0,
    )


class KnowledgeStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    async def test_an_unknown_source_has_no_fingerprint(self, store: StoreT) -> None:
        assert await store.fingerprint("/nowhere.md") is None
        assert await store.sources() == []
        assert await store.keyword_search("anything", top_k=5) == []

    async def test_a_source_is_found_with_its_lines(self, store: StoreT) -> None:
        chunks = [
            chunk("# Deploying\nUse the blue pipeline.", 1),
            chunk("Rollbacks take ten minutes.", 5),
        ]
        await store.replace_source(info("/docs/ops.md"), chunks, None)
        assert await store.fingerprint("/docs/ops.md") == "f1"
        hits = await store.keyword_search("rollbacks minutes", top_k=5)
        assert [(h.source, h.line, h.end_line, h.content) for h in hits] == [
            ("/docs/ops.md", 5, 5, "Rollbacks take ten minutes.")
        ]
        assert hits[0].citation == "[/docs/ops.md:5]"

    async def test_replacing_a_source_drops_its_old_chunks(self, store: StoreT) -> None:
        await store.replace_source(info("/a.txt"), [chunk("old walrus text")], None)
        await store.replace_source(info("/b.txt"), [chunk("walrus in another file")], None)
        await store.replace_source(info("/a.txt", "f2"), [chunk("new penguin text")], None)
        assert await store.fingerprint("/a.txt") == "f2"
        assert [h.source for h in await store.keyword_search("walrus", top_k=5)] == ["/b.txt"]
        assert [h.content for h in await store.keyword_search("penguin", top_k=5)] == [
            "new penguin text"
        ]
        stats = await store.stats()
        assert (stats.sources, stats.chunks) == (2, 2)

    async def test_removing_a_source_forgets_it(self, store: StoreT) -> None:
        await store.replace_source(
            info("/a.txt"), [chunk("otter facts"), chunk("more otter", 2)], None
        )
        assert await store.remove_source("/a.txt") is True
        assert await store.remove_source("/a.txt") is False
        assert await store.keyword_search("otter", top_k=5) == []
        assert await store.fingerprint("/a.txt") is None
        assert (await store.stats()).chunks == 0

    async def test_sources_are_listed_by_name_with_chunk_counts(self, store: StoreT) -> None:
        await store.replace_source(info("/z.md"), [chunk("one")], None)
        await store.replace_source(info("/a.md"), [chunk("two"), chunk("three", 2)], None)
        listed = await store.sources()
        assert [(s.source, s.chunks) for s in listed] == [("/a.md", 2), ("/z.md", 1)]

    async def test_vectors_rank_by_cosine(self, store: StoreT) -> None:
        await store.replace_source(
            info("/v.txt"),
            [chunk("east", 1), chunk("north", 2), chunk("north-east", 3)],
            [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.7071, 0.7071, 0.0)],
        )
        hits = await store.vector_search((0.0, 1.0, 0.0), top_k=2)
        assert [h.content for h in hits] == ["north", "north-east"]
        assert hits[0].score == pytest.approx(1.0, abs=1e-3)
        assert hits[0].line == 2
        assert (await store.stats()).embedded_chunks == 3

    async def test_a_replaced_source_leaves_no_stale_vector(self, store: StoreT) -> None:
        await store.replace_source(info("/v.txt"), [chunk("old")], [(1.0, 0.0)])
        await store.vector_search((1.0, 0.0), top_k=1)  # a cached matrix must not outlive it
        await store.replace_source(info("/v.txt", "f2"), [chunk("new")], [(0.0, 1.0)])
        hits = await store.vector_search((1.0, 0.0), top_k=5)
        assert [h.content for h in hits] == ["new"]

    async def test_vectors_must_match_the_chunks(self, store: StoreT) -> None:
        with pytest.raises(ValueError, match="vectors"):
            await store.replace_source(info("/x"), [chunk("a"), chunk("b", 2)], [(1.0, 0.0)])
        assert await store.fingerprint("/x") is None

    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_query_syntax_is_plain_text(self, store: StoreT, query: str) -> None:
        await store.replace_source(info("/q"), [chunk('say "hello" and content: x NEAR y')], None)
        assert isinstance(await store.keyword_search(query, top_k=5), list)
