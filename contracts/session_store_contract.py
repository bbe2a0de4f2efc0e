"""The behaviour every SessionStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Generic, TypeVar

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.sessions.records import (
    MAX_RECORD_BYTES,
    SessionMessage,
    SessionPage,
    SessionStoreError,
)

StoreT = TypeVar("StoreT", bound=SessionStorePort)


class SessionStoreContract(Generic[StoreT]):
    """Subclass with a ``store`` fixture returning a fresh, empty store."""

    @pytest.fixture
    def store(self) -> StoreT:
        raise NotImplementedError("subclass must provide the `store` fixture")

    async def test_an_unknown_session_loads_empty(self, store: StoreT) -> None:
        assert await store.load("nobody") == ()
        assert await store.sessions() == []

    async def test_messages_round_trip_in_order(self, store: StoreT) -> None:
        call = ToolCall(id="c1", name="calculator", arguments={"expression": "2+2"})
        messages = [
            Message.user("What is 2+2?"),
            Message.assistant("", (call,)),
            Message.tool("4", tool_call_id="c1", name="calculator"),
            Message.assistant("It is 4. ünïcode ✓"),
        ]
        await store.append("s1", messages[:2])
        await store.append("s1", messages[2:])
        assert await store.load("s1") == tuple(messages)
        assert await store.sessions() == ["s1"]

    async def test_unparsed_tool_arguments_survive(self, store: StoreT) -> None:
        call = ToolCall(id="c", name="t", raw_arguments='{"broken": ')
        await store.append("s", [Message.assistant("", (call,))])
        [loaded] = await store.load("s")
        assert loaded.tool_calls[0].raw_arguments == '{"broken": '

    async def test_limit_returns_the_newest(self, store: StoreT) -> None:
        await store.append("s", [Message.user(str(i)) for i in range(5)])
        assert [m.content for m in await store.load("s", limit=2)] == ["3", "4"]
        assert await store.load("s", limit=0) == ()

    async def test_sessions_are_separate_and_deletable(self, store: StoreT) -> None:
        await store.append("a", [Message.user("in a")])
        await store.append("b", [Message.user("in b")])
        await store.delete("a")
        await store.delete("never-existed")
        assert await store.sessions() == ["b"]
        assert await store.load("a") == ()

    @pytest.mark.parametrize("bad", ["", "../escape", "a/b", ".hidden", "a\\b", "x" * 200])
    async def test_ids_that_could_escape_are_refused(self, store: StoreT, bad: str) -> None:
        with pytest.raises(ConfigurationError, match="Invalid session id"):
            await store.append(bad, [Message.user("x")])

    async def test_records_replay_exactly(self, store: StoreT) -> None:
        at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
        calls = (
            ToolCall(id="call_a", name="calculator", arguments={"expression": "6*7"}),
            ToolCall(id="call_b", name="think", arguments={"thought": "nested", "n": [1, 2]}),
        )
        records = [
            SessionMessage(message=Message.user("Compute"), created_at=at),
            SessionMessage(
                message=Message.assistant("", calls),
                model="qwen3:8b",
                usage=Usage(prompt_tokens=120, completion_tokens=17),
                created_at=at,
            ),
            SessionMessage(message=Message.tool("42", tool_call_id="call_a", name="calculator")),
            SessionMessage(message=Message.tool("ok", tool_call_id="call_b", name="think")),
            SessionMessage(
                message=Message.assistant("42."), model="qwen3:8b", usage=Usage(), created_at=at
            ),
        ]
        await store.append_records("r", records)
        assert await store.load_records("r") == tuple(records)
        assert await store.load("r") == tuple(r.message for r in records)
        assert await store.load_records("r", limit=1) == (records[-1],)

    async def test_plain_appends_are_stamped_with_the_time(self, store: StoreT) -> None:
        before = datetime.now(UTC)
        await store.append("t", [Message.user("hi")])
        [record] = await store.load_records("t")
        assert before <= record.created_at <= datetime.now(UTC)
        assert (record.model, record.usage) == ("", None)

    async def test_an_empty_append_creates_nothing(self, store: StoreT) -> None:
        await store.append_records("e", [])
        await store.append("e", [])
        assert await store.sessions() == []
        assert await store.list_sessions() == []

    async def test_listing_is_most_recent_first_with_counts_and_titles(self, store: StoreT) -> None:
        await store.append("old", [Message.assistant("hello"), Message.user("first  question\nx")])
        await store.append("new", [Message.user("y" * 200)])
        await store.append("old", [Message.assistant("again")])
        listed = await store.list_sessions()
        assert [(i.id, i.message_count) for i in listed] == [("old", 3), ("new", 1)]
        assert listed[0].title == "first question x"
        assert listed[1].title == "y" * 79 + "…"
        assert listed[0].created_at <= listed[0].updated_at
        assert [i.id for i in await store.list_sessions(limit=1)] == ["old"]
        await store.delete("old")
        assert [i.id for i in await store.list_sessions()] == ["new"]

    async def test_a_too_large_message_is_refused_and_nothing_is_stored(
        self, store: StoreT
    ) -> None:
        await store.append("big", [Message.user("kept")])
        huge = Message.tool("x" * (MAX_RECORD_BYTES + 1), tool_call_id="c", name="t")
        with pytest.raises(SessionStoreError, match="too large"):
            await store.append("big", [Message.user("lost with it"), huge])
        assert [m.content for m in await store.load("big")] == ["kept"]

    async def test_concurrent_appends_never_interleave_or_lose(self, store: StoreT) -> None:
        async def turn(n: int) -> None:
            await store.append("c", [Message.user(f"q{n}"), Message.assistant(f"a{n}")])

        await asyncio.gather(*(turn(n) for n in range(40)))
        loaded = await store.load("c")
        assert len(loaded) == 80
        pairs = [(loaded[i].content, loaded[i + 1].content) for i in range(0, 80, 2)]
        assert sorted(pairs) == sorted((f"q{n}", f"a{n}") for n in range(40))

    async def test_any_text_survives(self, store: StoreT) -> None:
        odd = "nul \x00, escape \x1b[0m, line\u2028separator, emoji 🦀, quote ' \" \\"
        call = ToolCall(id="c\x00", name="t", arguments={"k": odd, "n": 1.5, "big": 2**70})
        messages = (Message.user(odd), Message.assistant(odd, (call,)))
        await store.append("odd", messages)
        assert await store.load("odd") == messages

    async def test_a_negative_limit_is_refused(self, store: StoreT) -> None:
        with pytest.raises(ConfigurationError, match="limit"):
            await store.load("s", limit=-1)

    async def test_records_are_read_a_page_at_a_time_in_order(self, store: StoreT) -> None:
        await store.append("long", [Message.user(str(i)) for i in range(7)])
        await store.append("long", [Message.assistant(str(i)) for i in range(7, 10)])
        await store.append("other", [Message.user("not mine")])
        for size in (1, 3, 5, 10, 500):
            read = [r.message.content async for r in store.iter_records("long", page_size=size)]
            assert read == [str(i) for i in range(10)], size
        assert [r async for r in store.iter_records("nobody")] == []

    async def test_paged_reads_match_the_whole_read(self, store: StoreT) -> None:
        at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
        call = ToolCall(id="call_a", name="calculator", arguments={"expression": "6*7"})
        records = [
            SessionMessage(message=Message.user("Compute"), created_at=at),
            SessionMessage(
                message=Message.assistant("", (call,)),
                model="m",
                usage=Usage(prompt_tokens=3, completion_tokens=4),
                created_at=at,
            ),
            SessionMessage(
                message=Message.tool("42", tool_call_id="call_a", name="calculator"),
                created_at=at,
            ),
        ]
        await store.append_records("r", records)
        paged = tuple([r async for r in store.iter_records("r", page_size=2)])
        assert paged == await store.load_records("r") == tuple(records)

    async def test_an_append_between_pages_is_never_read_twice(self, store: StoreT) -> None:
        await store.append("grow", [Message.user(str(i)) for i in range(4)])
        seen: list[str] = []
        async for record in store.iter_records("grow", page_size=2):
            seen.append(record.message.content)
            if len(seen) == 2:
                await store.append("grow", [Message.user("4")])
        assert seen[:4] == ["0", "1", "2", "3"]
        assert seen in (["0", "1", "2", "3"], ["0", "1", "2", "3", "4"])

    async def test_pages_walk_a_session_backwards_from_its_newest_message(
        self, store: StoreT
    ) -> None:
        await store.append("walk", [Message.user(str(i)) for i in range(7)])
        await store.append("walk", [Message.assistant(str(i)) for i in range(7, 10)])
        await store.append("other", [Message.user("not mine")])
        for size in (1, 3, 4, 10, 500):
            pages: list[list[str]] = []
            before: int | None = None
            while before != 0:
                page = await store.load_page("walk", limit=size, before=before)
                assert page.records, (size, before)
                assert len(page.records) == min(size, page.start + len(page.records))
                pages.append([r.message.content for r in page.records])
                before = page.start
            read = [content for page_read in reversed(pages) for content in page_read]
            assert read == [str(i) for i in range(10)], size
        newest = await store.load_page("walk", limit=3)
        assert (newest.start, [r.message.content for r in newest.records]) == (7, ["7", "8", "9"])
        assert (await store.load_page("walk", limit=2, before=99)).start == 8
        assert (await store.load_page("walk", limit=2, before=0)).records == ()
        assert await store.load_page("nobody", limit=5) == SessionPage(start=0, records=())

    async def test_a_page_keeps_records_whole_and_ignores_later_appends(
        self, store: StoreT
    ) -> None:
        at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
        records = [
            SessionMessage(message=Message.user(f"q{i}"), model="m", created_at=at)
            for i in range(5)
        ]
        await store.append_records("grow", records)
        first = await store.load_page("grow", limit=2)
        await store.append("grow", [Message.user("later")])
        older = await store.load_page("grow", limit=2, before=first.start)
        assert first.records == tuple(records[3:])
        assert older == SessionPage(start=1, records=tuple(records[1:3]))

    async def test_a_page_below_one_message_or_before_zero_is_refused(self, store: StoreT) -> None:
        with pytest.raises(ConfigurationError, match="limit"):
            await store.load_page("s", limit=0)
        with pytest.raises(ConfigurationError, match="before"):
            await store.load_page("s", limit=1, before=-1)

    async def test_a_page_size_below_one_is_refused(self, store: StoreT) -> None:
        await store.append("s", [Message.user("x")])
        with pytest.raises(ConfigurationError, match="page_size"):
            [r async for r in store.iter_records("s", page_size=0)]
