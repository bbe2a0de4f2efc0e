"""The SDK's conversation objects: history carried, exchanges stored, sync and async alike.

They run on the default wiring (the SQLite store in the test's config dir) unless a test
swaps the store for the in-memory fake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jarvis import Jarvis
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.testing import InMemorySessionStore, ScriptedInference


def contents(engine: ScriptedInference, index: int) -> list[str]:
    return [m.content for m in engine.requests[index].messages if m.role is not Role.SYSTEM]


def test_a_conversation_carries_its_history_and_is_stored_in_sqlite(jarvis_home: Path) -> None:
    engine = ScriptedInference(["Paris.", "About 2 million.", "Rome."])
    with Jarvis(inference=engine) as j:
        with j.conversation() as chat:
            assert chat.ask("Capital of France?") == "Paris."
            assert chat.ask("Its population?") == "About 2 million."
            stored = chat.messages()
        assert j.ask("Capital of Italy?") == "Rome."  # a one-off question: no history
    assert contents(engine, 1) == ["Capital of France?", "Paris.", "Its population?"]
    assert contents(engine, 2) == ["Capital of Italy?"]
    assert [r.message.content for r in stored] == [
        "Capital of France?",
        "Paris.",
        "Its population?",
        "About 2 million.",
    ]
    assert (jarvis_home / "sessions.db").is_file()


def test_named_conversations_resume_across_instances() -> None:
    store = InMemorySessionStore()
    engine = ScriptedInference(["One.", "Two."])
    with Jarvis(inference=engine) as j:
        j.container.sessions.override(store)
        j.conversation("notes").ask("first")
    with Jarvis(inference=engine) as j:
        j.container.sessions.override(store)
        with j.conversation("notes") as chat:
            chat.ask("second")
    assert contents(engine, 1) == ["first", "One.", "second"]


def test_conversation_options_apply_to_each_question_and_tool_calls_are_kept() -> None:
    call = ToolCall(id="call_t", name="think", arguments={"thought": "hmm"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "Done.", "Ok."]
    )
    store = InMemorySessionStore()
    with Jarvis(inference=engine) as j:
        j.container.sessions.override(store)
        chat = j.conversation(agent="orchestrator", tools=["think"])
        assert chat.ask("Think first") == "Done."
        chat.ask("Again")
    replayed = engine.requests[-1].messages
    assert [m.role for m in replayed[1:]] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert replayed[2].tool_calls == (call,)
    assert replayed[3].tool_call_id == "call_t"


def test_a_stream_stopped_early_stores_nothing() -> None:
    store = InMemorySessionStore()
    engine = ScriptedInference(["The capital of France is Paris."])
    with Jarvis(inference=engine) as j:
        j.container.sessions.override(store)
        chat = j.conversation("s")
        stream = chat.ask_stream("Capital?")
        assert next(stream)
        stream.close()
        assert chat.messages() == ()
        assert "".join(chat.ask_stream("Capital?")) == "The capital of France is Paris."
        assert len(chat.messages()) == 2


async def test_an_async_conversation_runs_on_the_callers_loop() -> None:
    store = InMemorySessionStore()
    engine = ScriptedInference(["A.", "B."])
    async with Jarvis(inference=engine) as j:
        j.container.sessions.override(store)
        async with j.aconversation("a") as chat:
            assert await chat.aask("q1") == "A."
            pieces = [p async for p in chat.aask_stream("q2")]
            assert "".join(pieces) == "B."
            assert len(await chat.amessages()) == 4
    assert contents(engine, 1) == ["q1", "A.", "q2"]


def test_an_invalid_session_name_is_refused() -> None:
    with Jarvis(inference=ScriptedInference()) as j, pytest.raises(ConfigurationError):
        j.conversation("../escape")
