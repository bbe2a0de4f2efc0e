"""The SQLite FTS5 memory on a real database file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.memory_contract import MemoryContract
from jarvis.adapters.sqlite_memory import SqliteMemory
from jarvis.adapters.sqlite_memory import store as memory_store
from jarvis.adapters.sqlite_memory.store import fts_query
from jarvis.domain.knowledge import MemoryStoreBusyError


class TestSqliteMemory(MemoryContract[SqliteMemory]):
    @pytest.fixture
    async def memory(self, tmp_path: Path) -> AsyncIterator[SqliteMemory]:
        memory = SqliteMemory(str(tmp_path / "memory.db"))
        yield memory
        await memory.aclose()


async def test_entries_survive_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "nested" / "memory.db")
    first = SqliteMemory(path)
    await first.store("The staging database is called atlas.", source="notes", metadata={"k": 1})
    await first.aclose()
    second = SqliteMemory(path)
    hits = await second.search("staging database")
    await second.aclose()
    assert [(h.content, h.source) for h in hits] == [
        ("The staging database is called atlas.", "notes")
    ]


@pytest.mark.parametrize(
    "dropped",
    ["DROP TABLE memory_vectors", "DROP TABLE memory_sources", "DROP INDEX memories_by_source"],
)
async def test_a_file_missing_part_of_the_schema_gets_it_back_and_keeps_its_entries(
    tmp_path: Path, dropped: str
) -> None:
    """As a file written by an earlier jarvis: opening adds what is missing (one
    transaction), and a file that has everything is opened without a write."""
    path = str(tmp_path / "memory.db")
    first = SqliteMemory(path)
    await first.store("The staging database is called atlas.", source="notes")
    await first.aclose()
    with sqlite3.connect(path) as raw:
        raw.execute(dropped)
    second = SqliteMemory(path)
    hits = await second.search("staging database")
    stats = await second.stats()
    await second.aclose()
    assert [h.content for h in hits] == ["The staging database is called atlas."]
    assert stats is not None
    with sqlite3.connect(path) as raw:
        names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert {"memory_vectors", "memory_sources", "memories_by_source"} <= names


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_store, "BUSY_TIMEOUT", 0.2)


@pytest.mark.usefixtures("short_wait")
async def test_a_lock_held_past_the_wait_is_busy_not_damage(tmp_path: Path) -> None:
    """Another process holding the file (bringing it up to date, or writing) past the wait:
    "try again", never "damaged, move it aside"; the entries are kept."""
    path = str(tmp_path / "memory.db")
    first = SqliteMemory(path)
    await first.store("The staging database is called atlas.", source="notes")
    await first.aclose()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP INDEX memories_by_source")  # an earlier jarvis's file
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    opening = SqliteMemory(path)
    with pytest.raises(MemoryStoreBusyError, match="stayed locked by another process"):
        await opening.search("staging")
    holder.execute("COMMIT")
    assert [h.content for h in await opening.search("staging")] == [
        "The staging database is called atlas."
    ]
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(MemoryStoreBusyError, match="run it again"):
        await opening.store("Another note.", source="notes")
    holder.execute("COMMIT")
    await opening.store("Another note.", source="notes")
    assert len(await opening.search("note")) == 1
    await opening.aclose()
    holder.close()


async def test_nothing_is_opened_until_first_use(tmp_path: Path) -> None:
    SqliteMemory(str(tmp_path / "never" / "memory.db"))
    assert not (tmp_path / "never").exists()


async def test_stemming_finds_other_forms_of_a_word() -> None:
    memory = SqliteMemory(":memory:")
    await memory.store("She was running the migrations.")
    assert await memory.search("run migration")
    await memory.aclose()


async def test_rarer_words_weigh_more() -> None:
    memory = SqliteMemory(":memory:")
    for i in range(6):
        await memory.store(f"common filler text number {i}")
    await memory.store("common text mentioning zeppelin")
    hits = await memory.search("common zeppelin")
    assert hits[0].content == "common text mentioning zeppelin"
    await memory.aclose()


async def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    memory = SqliteMemory(str(tmp_path / "m.db"))
    await asyncio.gather(*(memory.store(f"parallel entry {i} walrus") for i in range(40)))
    results = await asyncio.gather(*(memory.search("walrus", top_k=20) for _ in range(10)))
    assert all(len(r) == 20 for r in results)
    await memory.aclose()


def test_queries_become_quoted_words_only() -> None:
    assert fts_query('say "hi" AND NEAR(x) col:val*') == (
        '"say" OR "hi" OR "AND" OR "NEAR" OR "x" OR "col" OR "val"'
    )
    assert fts_query("Word word WORD") == '"Word"'
    assert fts_query("!?") == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_no_user_text_breaks_the_query(text: str) -> None:
    async def run() -> None:
        memory = SqliteMemory(":memory:")
        await memory.store("alpha beta gamma " + text)
        hits = await memory.search(text)
        assert isinstance(hits, list)
        await memory.aclose()

    asyncio.run(run())
