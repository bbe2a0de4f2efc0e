"""The conversation use case, on the in-memory store and on SQLite alike.

What the model is sent is read from the scripted engine's request log: the second turn
must carry the first exchange as real messages (tool calls with their ids, tool results
with their call ids), bounded, and a failed or abandoned turn must store nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.conversation import (
    ConversationService,
    HistoryLimits,
    HistoryUsed,
    UnknownSessionError,
    new_session_id,
)
from jarvis.application.registry import builtin_agents
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.run.updates import TextDelta
from jarvis.domain.sessions.ids import check_session_id
from jarvis.testing import InMemorySessionStore, ScriptedInference
from tests.support.sql_stores import sqlite_sessions


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStorePort]:
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    sqlite = sqlite_sessions(tmp_path / "sessions.db")
    yield sqlite
    sqlite.close()


def conversations(
    engine: ScriptedInference, store: SessionStorePort, **limits: int | None
) -> ConversationService:
    asker = AskService(
        registry=builtin_agents(), inference=engine, tools=ToolCatalogue([ThinkTool()])
    )
    return ConversationService(asker, store, limits=HistoryLimits(**limits))


def roles(messages: tuple[Message, ...]) -> list[str]:
    return [m.role.value for m in messages]


async def test_the_second_turn_carries_the_first_exchange(store: SessionStorePort) -> None:
    engine = ScriptedInference(["Paris.", "About 2.1 million."])
    service = conversations(engine, store)
    first = await service.ask("s1", AskQuestion(question="Capital of France?"))
    assert first.history.new_session
    second = await service.ask("s1", AskQuestion(question="Its population?"))
    assert second.answer.content == "About 2.1 million."
    sent = engine.requests[1].messages
    assert roles(sent) == ["system", "user", "assistant", "user"]
    assert [m.content for m in sent[1:]] == ["Capital of France?", "Paris.", "Its population?"]
    stored = await store.load_records("s1")
    assert [r.message.content for r in stored] == [
        "Capital of France?",
        "Paris.",
        "Its population?",
        "About 2.1 million.",
    ]
    answer = stored[1]
    assert answer.model == "scripted-model"
    assert answer.usage is not None
    assert answer.usage.completion_tokens > 0
    assert stored[0].created_at <= answer.created_at


async def test_tool_calls_and_results_are_stored_and_replayed_with_their_ids(
    store: SessionStorePort,
) -> None:
    call = ToolCall(id="call_think_1", name="think", arguments={"thought": "check 2+2"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "It is 4."]
    )
    service = conversations(engine, store)
    command = AskQuestion(question="What is 2+2?", agent="orchestrator", tools=("think",))
    await service.ask("tools", command)
    engine.add("Yes.")
    await service.ask("tools", AskQuestion(question="Sure?", agent="orchestrator"))
    sent = engine.requests[-1].messages
    assert roles(sent) == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2].tool_calls == (call,)
    assert sent[3].tool_call_id == "call_think_1"
    assert sent[3].name == "think"
    assert sent[3].content == "check 2+2"
    assert sent[4].content == "It is 4."
    stored = await store.load_records("tools")
    assert stored[1].model == "scripted-model"  # the assistant's tool-call message too


async def test_history_is_bounded_oldest_first_without_splitting_a_tool_exchange(
    store: SessionStorePort,
) -> None:
    call = ToolCall(id="c1", name="think", arguments={"thought": "x"})
    await store.append(
        "b",
        [
            Message.user("one"),
            Message.assistant("1"),
            Message.user("two"),
            Message.assistant("", (call,)),
            Message.tool("x", tool_call_id="c1", name="think"),
            Message.assistant("2"),
            Message.user("three"),
            Message.assistant("3"),
        ],
    )
    engine = ScriptedInference(["4"])
    # five messages would cut between the tool call and its result: the whole unit goes
    used = await conversations(engine, store, max_messages=5).history("b")
    assert [m.content for m in used.messages] == ["three", "3"]
    assert used.trimmed.dropped == 6
    assert "6 older left out" in used.describe()
    used = await conversations(engine, store, max_messages=6).history("b")
    assert roles(used.messages) == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    # tokens bound the history as well
    used = await conversations(engine, store, max_tokens=12).history("b")
    assert [m.content for m in used.messages] == ["three", "3"]
    await conversations(engine, store, max_messages=0).ask("b", AskQuestion(question="four?"))
    assert roles(engine.requests[-1].messages) == ["system", "user"]


async def test_a_long_session_is_read_through_a_window(store: SessionStorePort) -> None:
    for n in range(100):
        await store.append("long", [Message.user(f"q{n}"), Message.assistant(f"a{n}")])
    used = await conversations(ScriptedInference(), store, max_messages=4).history("long")
    assert [m.content for m in used.messages] == ["q98", "a98", "q99", "a99"]
    assert used.older_unread
    assert "every older message" in used.describe()


async def test_a_failed_turn_stores_nothing(store: SessionStorePort) -> None:
    engine = ScriptedInference(["Paris."])
    service = conversations(engine, store)
    await service.ask("f", AskQuestion(question="Capital?"))
    engine.add(EngineUnavailableError("down", engine="scripted"))
    with pytest.raises(EngineUnavailableError):
        await service.ask("f", AskQuestion(question="Again?"))
    assert len(await store.load("f")) == 2


async def test_a_turn_abandoned_mid_answer_stores_nothing(store: SessionStorePort) -> None:
    engine = ScriptedInference(["The capital of France is Paris."])
    service = conversations(engine, store)
    seen: list[object] = []
    stream = service.stream("cut", AskQuestion(question="Capital?"))
    assert isinstance(stream, AsyncIterator)
    async for update in stream:
        seen.append(update)
        if isinstance(update, TextDelta):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert isinstance(seen[0], HistoryUsed)
    assert await store.load("cut") == ()


async def test_the_stream_gives_the_history_first_and_the_answer_last_once_stored(
    store: SessionStorePort,
) -> None:
    service = conversations(ScriptedInference(["Paris is the capital."]), store)
    updates = [u async for u in service.stream("st", AskQuestion(question="Capital?"))]
    assert isinstance(updates[0], HistoryUsed)
    assert isinstance(updates[-1], Answer)
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == "Paris is the capital."
    assert len(await store.load("st")) == 2


async def test_the_callers_own_context_is_kept_after_the_history(store: SessionStorePort) -> None:
    from jarvis.domain.run.contract import AgentContext

    engine = ScriptedInference(["a", "b"])
    service = conversations(engine, store)
    await service.ask("ctx", AskQuestion(question="q1"))
    context = AgentContext(conversation=(Message.system("Be brief."),))
    await service.ask("ctx", AskQuestion(question="q2", context=context))
    sent = engine.requests[-1].messages
    assert sent[0].role is Role.SYSTEM
    assert sent[0].content.endswith("Be brief.")
    assert [m.content for m in sent[1:]] == ["q1", "a", "q2"]


async def test_sessions_last_unknown_and_delete(store: SessionStorePort) -> None:
    service = conversations(ScriptedInference(["x"]), store)
    assert await service.last_session() is None
    await service.ask("older", AskQuestion(question="q"))
    await service.ask("newer", AskQuestion(question="q"))
    assert await service.last_session() == "newer"
    with pytest.raises(UnknownSessionError) as info:
        await service.records("nope")
    assert "newer, older" in info.value.message
    with pytest.raises(UnknownSessionError):
        await service.delete("nope")
    await service.delete("older")
    assert [s.id for s in await service.list_sessions()] == ["newer"]


def test_new_session_ids_are_valid_and_distinct() -> None:
    ids = {new_session_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(check_session_id(i) == i for i in ids)


class _CleaningAsker:
    """An asker whose run does its cleanup after the answer, as an agent that owns a
    container or a process does (it stops them once its result is out)."""

    def __init__(self) -> None:
        self.cleaned = False
        self.events: list[str] = []

    async def stream(self, command: AskQuestion) -> AsyncIterator[TextDelta | Answer]:
        try:
            yield TextDelta(text="Paris.")
            yield Answer(
                content="Paris.",
                turns=1,
                tool_results=(),
                usage=Usage(),
                model="m",
                engine="e",
                stop_reason="final_answer",
            )
            self.events.append("cleaned")
            self.cleaned = True
        finally:
            self.events.append("closed")


async def test_a_run_ends_before_its_answer_is_handed_on(store: SessionStorePort) -> None:
    """``ask`` (which stops at the answer) and ``stream`` both let the run finish what follows
    its answer: a kept ``jarvis ask -a sandboxed`` left its container running."""
    asker = _CleaningAsker()
    service = ConversationService(asker, store)
    answered = await service.ask("a", AskQuestion(question="Capital?"))
    assert answered.answer.content == "Paris."
    assert asker.events == ["cleaned", "closed"]
    asker = _CleaningAsker()
    service = ConversationService(asker, store)
    async for update in service.stream("b", AskQuestion(question="Capital?")):
        if isinstance(update, Answer):
            assert asker.cleaned
            break
