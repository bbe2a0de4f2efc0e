"""``simple``: one inference with the right messages, streamed or not."""

from __future__ import annotations

import pytest

from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.loop.settings import PromptSettings
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.run.events import Event, EventBus, EventType
from jarvis.domain.run.updates import RunFinished, TextDelta
from jarvis.testing import ScriptedInference


async def test_one_call_with_system_prompt_context_and_input() -> None:
    engine = ScriptedInference(["<think>hmm</think> Paris."])
    agent = SimpleAgent(
        engine, "m", prompts=PromptSettings(persona_prompt="## Agent Persona\n\nBe brief.")
    )
    context = AgentContext(
        conversation=(
            Message.system("Remembered: the user likes maps."),
            Message.user("earlier question"),
            Message.assistant("earlier answer"),
        )
    )
    result = await agent.arun("Capital of France?", context)

    assert result.content == "Paris."
    assert result.turns == 1
    assert result.stop_reason == "final_answer"
    assert result.usage.total_tokens > 0
    [request] = engine.requests
    roles = [m.role for m in request.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER]
    system = request.messages[0].content
    assert (
        system.index("You are a helpful AI assistant")
        < system.index("Be brief.")
        < system.index("maps")
    )
    assert request.messages[-1].content == "Capital of France?"


async def test_system_prompt_replaces_the_template_but_not_the_persona() -> None:
    engine = ScriptedInference(["ok"])
    agent = SimpleAgent(
        engine,
        "m",
        prompts=PromptSettings(system_prompt="Answer in French.", persona_prompt="SOUL"),
    )
    await agent.arun("hi")
    system = engine.requests[0].messages[0].content
    assert system == "Answer in French.\n\nSOUL"


async def test_streaming_yields_text_then_the_result() -> None:
    engine = ScriptedInference(["The capital is Paris."])
    agent = SimpleAgent(engine, "m")
    updates = [u async for u in agent.astream("q")]
    deltas = [u.text for u in updates if isinstance(u, TextDelta)]
    assert "".join(deltas) == "The capital is Paris."
    assert len(deltas) > 1
    final = updates[-1]
    assert isinstance(final, RunFinished)
    assert final.result.content == "The capital is Paris."
    assert final.result.usage.completion_tokens > 0


async def test_events_are_published_around_the_turn_and_the_inference() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    await SimpleAgent(ScriptedInference(["ok"]), "m", bus=bus).arun("hi")
    assert [e.type for e in seen] == [
        EventType.AGENT_RUN_START,
        EventType.INFERENCE_START,
        EventType.INFERENCE_END,
        EventType.AGENT_RUN_END,
    ]


async def test_engine_errors_propagate_typed() -> None:
    agent = SimpleAgent(ScriptedInference(healthy=False), "m")
    with pytest.raises(EngineUnavailableError) as info:
        await agent.arun("hi")
    assert info.value.retryable
