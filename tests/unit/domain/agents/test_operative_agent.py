"""``operative``: state recalled and saved, history replayed, memory_store, failures, events."""

from __future__ import annotations

import asyncio

import pytest

from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.operative import OperativeAgent
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.domain.run.events import AgentRunEnded, AgentRunStarted, Event, EventBus, EventType
from jarvis.domain.sessions.records import SessionStoreUnavailableError
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.operators import InMemoryOperatorStore

PROMPT = "Check the build status and report."


def binding(
    sessions: InMemorySessionStore | None = None,
    store: InMemoryOperatorStore | None = None,
    operator_id: str = "watch",
) -> OperatorBinding:
    return OperatorBinding(
        operator_id=operator_id,
        sessions=sessions or InMemorySessionStore(),
        store=store or InMemoryOperatorStore(),
        tick_label="2030-01-01T08:00:00Z",
    )


def operative(
    engine: ScriptedInference,
    bound: OperatorBinding | None,
    *,
    agent: str = "operative",
    bus: EventBus | None = None,
    **options: JSONValue,
) -> OperativeAgent:
    parts = AgentParts(inference=engine, model="m", operator=bound, bus=bus)
    built = builtin_agents().create(agent, parts, options)
    assert isinstance(built, OperativeAgent)
    return built


def call(name: str, call_id: str = "c1", **arguments: JSONValue) -> Completion:
    return Completion(
        content="", tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )  # fmt: skip


def test_registered_with_the_missions_defaults() -> None:
    agent = operative(ScriptedInference(), binding())
    assert agent.temperature == 0.3
    assert agent.max_tokens == 2048
    assert agent.max_turns == 20
    assert agent.accepts_tools


async def test_a_tick_saves_prompt_answer_and_state_and_the_next_tick_recalls_them() -> None:
    bound = binding()
    engine = ScriptedInference(["Build 41 is green."])
    await operative(engine, bound).arun(PROMPT)
    saved = await bound.sessions.load("operator:watch")
    assert [(m.role, m.content) for m in saved] == [
        (Role.USER, PROMPT),
        (Role.ASSISTANT, "Build 41 is green."),
    ]
    assert await bound.store.get_state("operator:watch:state") == "Build 41 is green."
    first_system = engine.requests[0].messages[0].content
    assert "(none yet: this is the first tick)" in first_system
    assert "You are an operator" in first_system

    engine.add("Build 42 is red.")
    result = await operative(engine, bound).arun(PROMPT)
    second = engine.requests[1].messages
    assert "## Previous State\nBuild 41 is green." in second[0].content
    assert [(m.role, m.content) for m in second[1:]] == [
        (Role.USER, PROMPT),
        (Role.ASSISTANT, "Build 41 is green."),
        (Role.USER, PROMPT),
    ]
    assert result.metadata["state_saved"] == "answer"
    assert await bound.store.get_state("operator:watch:state") == "Build 42 is red."


async def test_the_input_is_always_the_prompt_never_the_previous_answer() -> None:
    """The original's parrot loop fed the previous tick's answer back as the input."""
    bound = binding()
    engine = ScriptedInference(["First answer.", "Second answer.", "Third."])
    for _ in range(3):
        await operative(engine, bound).arun(PROMPT)
    for request in engine.requests:
        assert request.messages[-1].role is Role.USER
        assert request.messages[-1].content == PROMPT


async def test_state_stored_with_memory_store_is_not_overwritten_by_the_answer() -> None:
    bound = binding()
    engine = ScriptedInference(
        [call("memory_store", key="state", value={"last_build": 41}), "Done, noted build 41."]
    )
    result = await operative(engine, bound).arun(PROMPT)
    assert result.content == "Done, noted build 41."
    assert await bound.store.get_state("operator:watch:state") == {"last_build": 41}
    assert result.metadata["state_saved"] == "by_memory_store"
    offered = [spec.name for spec in engine.requests[0].tools or ()]
    assert "memory_store" in offered

    engine.add("Next.")
    await operative(engine, bound).arun(PROMPT)
    assert '## Previous State\n{"last_build": 41}' in engine.requests[2].messages[0].content


async def test_the_full_state_key_counts_as_storing_the_state() -> None:
    bound = binding()
    engine = ScriptedInference([call("memory_store", key="operator:watch:state", value="s"), "ok"])
    await operative(engine, bound).arun(PROMPT)
    assert await bound.store.get_state("operator:watch:state") == "s"


async def test_notes_are_kept_under_the_operator_and_recalled() -> None:
    bound = binding()
    engine = ScriptedInference([call("memory_store", key="owner", value="team-a"), "noted"])
    await operative(engine, bound).arun(PROMPT)
    assert await bound.store.get_state("operator:watch:memory:owner") == "team-a"
    engine.add("again")
    await operative(engine, bound).arun(PROMPT)
    assert "## Stored Notes\n- owner: team-a" in engine.requests[2].messages[0].content


@pytest.mark.parametrize(
    "key", ["operator:other:state", "../x", "a b", "operator:watch:memory:x", "note\n"]
)
async def test_memory_store_never_writes_outside_its_operator(key: str) -> None:
    store = InMemoryOperatorStore()
    bound = binding(store=store)
    engine = ScriptedInference([call("memory_store", key=key, value="evil"), "ok"])
    result = await operative(engine, bound).arun(PROMPT)
    assert not result.tool_results[0].success
    assert await store.state_keys("operator:other") == []
    assert await store.state_keys("operator:watch:memory:") == []


@pytest.mark.parametrize("answer", ["", "   "])
async def test_an_empty_answer_never_overwrites_the_state(answer: str) -> None:
    store = InMemoryOperatorStore()
    await store.put_state("operator:watch:state", "precious")
    engine = ScriptedInference([answer])
    result = await operative(engine, binding(store=store)).arun(PROMPT)
    assert await store.get_state("operator:watch:state") == "precious"
    assert result.metadata["state_saved"] == "kept"


async def test_a_failed_engine_saves_nothing_and_ends_the_run() -> None:
    store, sessions = InMemoryOperatorStore(), InMemorySessionStore()
    await store.put_state("operator:watch:state", "precious")
    bus, events = recording_bus()
    engine = ScriptedInference([EngineUnavailableError("down", engine="scripted")])
    with pytest.raises(EngineUnavailableError):
        await operative(engine, binding(sessions, store), bus=bus).arun(PROMPT)
    assert await store.get_state("operator:watch:state") == "precious"
    assert await sessions.load("operator:watch") == ()
    assert ends(events) == ["error"]


def recording_bus() -> tuple[EventBus, list[Event]]:
    bus, events = EventBus(), list[Event]()
    bus.subscribe(events.append)
    return bus, events


def ends(events: list[Event]) -> list[str]:
    return [e.stop_reason for e in events if isinstance(e, AgentRunEnded)]


async def test_run_events_once_per_tick_on_every_exit_path() -> None:
    bus, events = recording_bus()
    engine = ScriptedInference([call("memory_store", value="x"), "done"])
    await operative(engine, binding(), bus=bus).arun(PROMPT)
    runs = (EventType.AGENT_RUN_START, EventType.AGENT_RUN_END)
    assert [type(e) for e in events if e.type in runs] == [AgentRunStarted, AgentRunEnded]
    assert ends(events) == ["final_answer"]
    assert any(e.type is EventType.TOOL_CALL_END for e in events)

    events.clear()  # max turns: the original published no end event on this path
    looping = ScriptedInference([call("memory_store", call_id=f"c{n}", value=n) for n in range(5)])
    result = await operative(looping, binding(), bus=bus, max_turns=2).arun(PROMPT)
    assert result.stop_reason == "max_turns"
    assert ends(events) == ["max_turns"]


async def test_a_store_that_fails_while_saving_ends_the_run_with_error() -> None:
    class Failing(InMemorySessionStore):
        async def append_records(
            self, session_id: str, records: object, *, owner: object = None
        ) -> None:
            raise SessionStoreUnavailableError("down")

    bus, events = recording_bus()
    engine = ScriptedInference(["answer"])
    with pytest.raises(SessionStoreUnavailableError):
        await operative(engine, binding(Failing()), bus=bus).arun(PROMPT)
    assert ends(events) == ["error"]


async def test_cancelling_a_tick_publishes_cancelled_and_saves_nothing() -> None:
    bus, events = recording_bus()
    sessions = InMemorySessionStore()
    engine = ScriptedInference(["slow"], latency=30)
    task = asyncio.create_task(operative(engine, binding(sessions), bus=bus).arun(PROMPT))
    for _ in range(1000):  # the request is recorded before the engine's latency starts
        if engine.requests:
            break
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ends(events) == ["cancelled"]
    assert await sessions.load("operator:watch") == ()


async def test_history_is_bounded_and_never_starts_inside_an_exchange() -> None:
    bound = binding()
    engine = ScriptedInference([f"answer {n}" for n in range(6)])
    for _ in range(6):
        await operative(engine, bound, history_messages=3).arun(PROMPT)
    last = engine.requests[-1].messages
    assert [m.role for m in last[1:]] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert last[2].content == "answer 4"


async def test_without_an_operator_it_says_how_to_make_one() -> None:
    with pytest.raises(ConfigurationError, match="jarvis operators add"):
        await operative(ScriptedInference(), None).arun(PROMPT)


def test_memory_store_cannot_be_given_as_a_user_tool() -> None:
    from jarvis.domain.agents.memory_store import MemoryStoreTool

    tool = MemoryStoreTool(InMemoryOperatorStore(), "x")
    with pytest.raises(ConfigurationError, match="own tool"):
        OperativeAgent(ScriptedInference(), "m", tools=[tool])


@pytest.mark.parametrize("agent", ["operative", "monitor_operative"])
async def test_the_persona_follows_the_operatives_own_prompt_and_precedes_its_state(
    agent: str,
) -> None:
    """The original's persistent agents ignored SOUL/MEMORY/USER."""
    from jarvis.domain.loop.settings import PromptSettings

    persona = "## Agent Persona\n\nAlways answer in French."
    engine = ScriptedInference(["bonjour"])
    parts = AgentParts(
        inference=engine,
        model="m",
        operator=binding(),
        prompts=PromptSettings(persona_prompt=persona),
    )
    options: dict[str, JSONValue] = {}
    if agent == "monitor_operative":
        options = {"task_decomposition": "monolithic", "retrieval_strategy": "none"}
    await builtin_agents().create(agent, parts, options).arun(PROMPT)
    system = engine.requests[0].messages[0].content
    own, _, rest = system.partition(persona)
    assert own.startswith("You are a")
    assert "operator" in own
    assert rest.lstrip().startswith("## Tick")
    assert "## Previous State" in rest
