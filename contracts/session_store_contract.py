"""The behaviour every SessionStorePort implementation shows (fake and real alike)."""

from __future__ import annotations

from typing import Generic, TypeVar

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.messages import Message, ToolCall
from jarvis.domain.ports import SessionStorePort

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
