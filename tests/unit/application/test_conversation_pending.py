"""Answering a question stored before its run, and keeping what a cut-short run completed.

Managed agents store the user's message first and then run it through the same
conversation use case as ``jarvis ask -c`` and ``jarvis chat``: these tests check that the
stored question is answered once (never stored twice, never replayed as its own history),
that a failed or cancelled run keeps its whole tool exchanges and streamed text (and
nothing of an exchange still waiting for a result), and that a managed agent's history is
bounded and recorded exactly as a conversation's is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.conversation import ConversationService, HistoryLimits, HistoryUsed
from jarvis.application.managed_agents import ManagedAgentService, ManagedAgentSpec
from jarvis.application.registry import builtin_agents
from jarvis.application.tools.calculator import CalculatorTool
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.domain.errors import EngineProtocolError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.managed_agents import ManagedAgentStorePort, session_id_of
from jarvis.domain.ports import SessionStorePort
from jarvis.domain.run.updates import RunUpdate, TextDelta, ToolCallsRequested, ToolResultReady
from jarvis.domain.sessions.records import SessionMessage
from jarvis.domain.tools.specs import ToolResult
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.managed_agents import InMemoryManagedAgentStore
from tests.support.sql_stores import sqlite_backend

CALL = ToolCall(id="c1", name="calculator", arguments={"expression": "12*7"})
OTHER = ToolCall(id="c2", name="calculator", arguments={"expression": "1+1"})
TOOL_TURN = Completion(content="Computing.", tool_calls=(CALL,), finish_reason="tool_calls")
ORCHESTRATOR = AskQuestion(question="", agent="orchestrator", tools=("calculator",))


Stores = tuple[SessionStorePort, ManagedAgentStorePort]


@pytest.fixture(params=["memory", "sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """A session store and the managed-agent store of its database."""
    if request.param == "memory":
        agents = InMemoryManagedAgentStore()
        yield InMemorySessionStore(owners=agents.holds), agents
        return
    sqlite = sqlite_backend(tmp_path / "sessions.db")
    yield sqlite.sessions, sqlite.managed_agents
    sqlite.close()


@pytest.fixture
def store(stores: Stores) -> SessionStorePort:
    return stores[0]


def asker(engine: ScriptedInference) -> AskService:
    return AskService(
        registry=builtin_agents(), inference=engine, tools=ToolCatalogue([CalculatorTool()])
    )


def contents(records: tuple[SessionMessage, ...]) -> list[tuple[str, str]]:
    return [(r.message.role.value, r.message.content) for r in records]


async def drain(updates: AsyncIterator[object]) -> list[object]:
    return [update async for update in updates]


async def test_a_stored_question_is_answered_once_with_the_history_before_it(
    store: SessionStorePort,
) -> None:
    engine = ScriptedInference(["Paris.", "About 2.1 million."])
    service = ConversationService(asker(engine), store)
    await service.ask("s", AskQuestion(question="Capital of France?"))
    question = SessionMessage(message=Message.user("Its population?"))
    await store.append_records("s", [question])
    turn = await service.pending("s")
    assert turn is not None
    assert turn.question.message.content == "Its population?"
    updates = await drain(service.answer("s", turn, AskQuestion(question="ignored")))
    assert isinstance(updates[0], HistoryUsed)
    assert isinstance(updates[-1], Answer)
    sent = engine.requests[1].messages
    assert [m.content for m in sent[1:]] == ["Capital of France?", "Paris.", "Its population?"]
    assert contents(await store.load_records("s")) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Its population?"),
        ("assistant", "About 2.1 million."),
    ]
    assert await service.pending("s") is None  # answered: nothing waits any more


async def test_a_named_question_keeps_later_messages_in_its_history(
    store: SessionStorePort,
) -> None:
    """Another client's message stored after this one stays history, never the question."""
    engine = ScriptedInference(["First answered."])
    service = ConversationService(asker(engine), store)
    mine = SessionMessage(message=Message.user("mine"))
    await store.append_records("s", [mine])
    await store.append_records("s", [SessionMessage(message=Message.user("theirs"))])
    (stored_mine, _) = await store.load_records("s")
    turn = await service.pending("s", stored_mine)
    assert turn is not None
    assert [m.content for m in turn.history.messages] == ["theirs"]
    await drain(service.answer("s", turn, AskQuestion(question="")))
    assert engine.requests[0].messages[-1].content == "mine"
    assert [r.message.content for r in await store.load_records("s")] == [
        "mine",
        "theirs",
        "First answered.",
    ]


async def test_a_run_that_fails_keeps_its_whole_tool_exchange_once(
    store: SessionStorePort,
) -> None:
    engine = ScriptedInference([TOOL_TURN, EngineProtocolError("garbled reply", engine="x")])
    service = ConversationService(asker(engine), store)
    await store.append_records("s", [SessionMessage(message=Message.user("12*7?"))])
    turn = await service.pending("s")
    assert turn is not None
    with pytest.raises(EngineProtocolError):
        await drain(service.answer("s", turn, ORCHESTRATOR))
    stored = await store.load_records("s")
    assert contents(stored) == [("user", "12*7?"), ("assistant", "Computing."), ("tool", "84")]
    assert stored[1].message.tool_calls == (CALL,)
    assert stored[2].message.tool_call_id == "c1"


async def test_keep_partial_on_a_plain_turn_stores_the_question_with_it(
    store: SessionStorePort,
) -> None:
    engine = ScriptedInference([TOOL_TURN, EngineProtocolError("garbled reply", engine="x")])
    service = ConversationService(asker(engine), store)
    command = AskQuestion(question="12*7?", agent="orchestrator", tools=("calculator",))
    with pytest.raises(EngineProtocolError):
        await drain(service.stream("s", command, keep_partial=True))
    assert [r.message.role for r in await store.load_records("s")] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    with pytest.raises(EngineProtocolError):  # and by default a failed turn stores nothing
        await drain(service.stream("t", command))
    assert await store.load_records("t") == ()


async def test_a_successful_stored_first_turn_appends_nothing_twice(
    store: SessionStorePort,
) -> None:
    engine = ScriptedInference([TOOL_TURN, "It is 84."])
    service = ConversationService(asker(engine), store)
    await store.append_records("s", [SessionMessage(message=Message.user("12*7?"))])
    turn = await service.pending("s")
    assert turn is not None
    updates = service.answer("s", turn, ORCHESTRATOR)
    async for update in updates:
        if isinstance(update, Answer):
            break  # closing after the answer: it is stored, nothing partial is added
    await updates.aclose()
    assert contents(await store.load_records("s")) == [
        ("user", "12*7?"),
        ("assistant", "Computing."),
        ("tool", "84"),
        ("assistant", "It is 84."),
    ]


class StallingAsker:
    """A run that does some work, then waits for an engine that never answers."""

    def __init__(self, *, answer_every_call: bool) -> None:
        self.answer_every_call = answer_every_call
        self.stalled = asyncio.Event()

    async def stream(self, command: AskQuestion) -> AsyncIterator[RunUpdate | Answer]:
        calls = (CALL,) if self.answer_every_call else (CALL, OTHER)
        yield ToolCallsRequested(calls=calls)
        yield ToolResultReady(result=ToolResult(tool_name="calculator", content="84", call_id="c1"))
        yield TextDelta(text="So far, 84")
        self.stalled.set()
        await asyncio.Event().wait()


async def cancel_when_stalled(service: ConversationService, run: StallingAsker) -> None:
    turn = await service.pending("s")
    assert turn is not None
    task = asyncio.create_task(drain(service.answer("s", turn, AskQuestion(question=""))))
    await run.stalled.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_run_keeps_what_it_completed_once(store: SessionStorePort) -> None:
    run = StallingAsker(answer_every_call=True)
    service = ConversationService(run, store)
    await store.append_records("s", [SessionMessage(message=Message.user("12*7?"))])
    await cancel_when_stalled(service, run)
    stored = await store.load_records("s")
    assert contents(stored) == [
        ("user", "12*7?"),
        ("assistant", ""),
        ("tool", "84"),
        ("assistant", "So far, 84"),
    ]
    assert stored[1].message.tool_calls == (CALL,)


async def test_a_cancelled_run_drops_an_exchange_still_waiting(store: SessionStorePort) -> None:
    """A call without its result could never be replayed: the exchange is left out, the
    text streamed is kept."""
    run = StallingAsker(answer_every_call=False)
    service = ConversationService(run, store)
    await store.append_records("s", [SessionMessage(message=Message.user("12*7?"))])
    await cancel_when_stalled(service, run)
    stored = await store.load_records("s")
    assert contents(stored) == [("user", "12*7?"), ("assistant", "So far, 84")]
    assert stored[1].message.tool_calls == ()


def managed(
    engine: ScriptedInference, stores: Stores, limits: HistoryLimits
) -> ManagedAgentService:
    service = asker(engine)

    async def ask() -> AskService:
        return service

    return ManagedAgentService(agents=stores[1], sessions=stores[0], ask=ask, limits=limits)


async def test_a_managed_agent_replays_a_failed_tool_as_the_model_saw_it(
    stores: Stores,
) -> None:
    divide = ToolCall(id="d1", name="calculator", arguments={"expression": "1/0"})
    failing = Completion(content="", tool_calls=(divide,), finish_reason="tool_calls")
    engine = ScriptedInference([failing, "It cannot be done.", "Because of the zero."])
    agents = managed(engine, stores, HistoryLimits())
    await agents.create(ManagedAgentSpec(id="calc", agent="orchestrator", tools=("calculator",)))
    await agents.post("calc", "1/0?")
    await agents.run("calc")
    await agents.post("calc", "Why?")
    await agents.run("calc")
    seen = [m for m in engine.requests[1].messages if m.role is Role.TOOL]
    replayed = [m for m in engine.requests[2].messages if m.role is Role.TOOL]
    assert seen[0].content.startswith("Error: ")
    assert replayed == seen


async def test_a_managed_agent_honours_the_history_limits_of_conversations(
    stores: Stores,
) -> None:
    store = stores[0]
    exchanges = [
        SessionMessage(message=message)
        for n in range(45)
        for message in (Message.user(f"q{n}"), Message.assistant(f"a{n}"))
    ]
    unbounded = HistoryLimits(max_messages=None, max_tokens=None)
    engine = ScriptedInference(["Answered."])
    agents = managed(engine, stores, unbounded)
    await agents.create(ManagedAgentSpec(id="long"))
    await store.append_records(session_id_of("long"), exchanges)
    history = await agents.history("long")
    conversation = await ConversationService(asker(engine), store, limits=unbounded).history(
        session_id_of("long")
    )
    assert history == conversation
    assert history.describe() == f"history of session {session_id_of('long')!r}: 90 messages" + (
        f" (~{history.trimmed.tokens} tokens)"
    )
    await agents.post("long", "And now?")
    await agents.run("long")
    sent = engine.requests[0].messages
    assert len(sent) == 1 + 90 + 1  # the system prompt, all 90 (no bound), the question
    limits = HistoryLimits(max_messages=3)
    bounded = ManagedAgentService(
        agents=agents.agents, sessions=store, ask=agents.ask, limits=limits
    )
    replayed = (await bounded.history("long")).messages
    assert [m.content for m in replayed] == ["And now?", "Answered."]  # starts on a user message
