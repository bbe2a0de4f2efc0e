"""The ask use case resolves agent, model, tools and persona before running."""

from __future__ import annotations

import pytest

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.registry import builtin_agents
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError, UnknownAgentError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.domain.run.updates import TextDelta
from jarvis.testing import InMemoryRepl, ScriptedInference


def service(engine: ScriptedInference, **kwargs: object) -> AskService:
    return AskService(registry=builtin_agents(), inference=engine, **kwargs)  # type: ignore[arg-type]


async def test_the_model_falls_back_to_the_engines_first_model() -> None:
    engine = ScriptedInference(["Paris"], models=["small", "big"])
    answer = await service(engine).ask(AskQuestion(question="Capital of France?"))
    assert answer.content == "Paris"
    assert answer.model == "small"
    assert answer.engine == "scripted"
    assert engine.requests[0].model == "small"


async def test_an_explicit_model_wins() -> None:
    engine = ScriptedInference(["x"])
    await service(engine, default_model="configured").ask(AskQuestion(question="q", model="given"))
    assert engine.requests[0].model == "given"


async def test_the_agent_settings_fill_what_a_question_leaves_unset() -> None:
    engine = ScriptedInference(["a", "b"], engine_id="llamacpp")
    configured = service(engine, default_temperature=0.3, default_max_tokens=7)
    await configured.ask(AskQuestion(question="q"))
    await configured.ask(AskQuestion(question="q", temperature=0.9, max_tokens=11))
    assert [(r.temperature, r.max_tokens) for r in engine.requests] == [(0.3, 7), (0.9, 11)]
    sampling = configured.sampling(AskQuestion(question="q"))
    assert (sampling.temperature, sampling.source) == (0.3, "requested")


async def test_an_engine_without_models_is_reported_with_a_hint() -> None:
    engine = ScriptedInference(["x"], models=[])
    with pytest.raises(EngineUnavailableError, match="lists no models") as info:
        await service(engine).ask(AskQuestion(question="q"))
    assert "--model" in info.value.hint


@pytest.mark.parametrize("question", ["", "   \n"])
async def test_an_empty_question_is_a_usage_error(question: str) -> None:
    with pytest.raises(ConfigurationError, match="empty"):
        await service(ScriptedInference()).ask(AskQuestion(question=question))


async def test_an_unknown_agent_lists_the_known_ones() -> None:
    with pytest.raises(UnknownAgentError):
        await service(ScriptedInference()).ask(AskQuestion(question="q", agent="nope"))


async def test_tools_on_an_agent_that_takes_none_are_refused_not_dropped() -> None:
    engine = ScriptedInference()
    with pytest.raises(ConfigurationError, match="does not take tools"):
        await service(engine).ask(AskQuestion(question="q", agent="simple", tools=("calculator",)))
    assert engine.requests == []


async def test_the_persona_prompt_is_resolved_per_question() -> None:
    engine = ScriptedInference(["ok"])
    asked: list[str | None] = []

    def persona(selection: str | None) -> str:
        asked.append(selection)
        return "" if selection == "none" else f"PERSONA:{selection}"

    svc = service(engine, persona=persona)
    await svc.ask(AskQuestion(question="q", persona="work"))
    await svc.ask(AskQuestion(question="q", persona="none"))
    assert asked == ["work", "none"]
    assert "PERSONA:work" in engine.requests[0].messages[0].content
    assert "PERSONA" not in engine.requests[1].messages[0].content


async def test_stream_yields_deltas_then_the_answer() -> None:
    svc = service(ScriptedInference(["a b c"]))
    items = [i async for i in svc.stream(AskQuestion(question="q"))]
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "a b c"
    answer = items[-1]
    assert isinstance(answer, Answer)
    assert answer.to_json()["content"] == "a b c"
    assert set(answer.to_json()) == {
        "content",
        "turns",
        "tool_results",
        "usage",
        "model",
        "engine",
        "stop_reason",
        "metadata",
    }


# --- [agent] max_turns -------------------------------------------------------------------------


def calls_forever() -> ScriptedInference:
    call = Completion(
        content="", tool_calls=(ToolCall(id="c", name="think", arguments={"thought": "hm"}),)
    )
    return ScriptedInference([call])  # the same call on every turn


def tool_service(engine: ScriptedInference, **kwargs: object) -> AskService:
    return service(engine, tools=ToolCatalogue([ThinkTool()]), repl=InMemoryRepl(), **kwargs)


@pytest.mark.parametrize(
    ("agent", "own_default"),
    [("orchestrator", 10), ("native_react", 10), ("native_openhands", 3), ("rlm", 10)],
)
async def test_configured_max_turns_is_the_default_of_every_tool_using_agent(
    agent: str, own_default: int
) -> None:
    question = AskQuestion(question="q", agent=agent)
    configured, _ = await tool_service(ScriptedInference(), default_max_turns=4).build_agent(
        question
    )
    assert isinstance(configured, ToolUsingAgent)
    assert configured.max_turns == 4
    unset, _ = await tool_service(ScriptedInference()).build_agent(question)
    assert isinstance(unset, ToolUsingAgent)
    assert unset.max_turns == own_default


async def test_an_explicit_max_turns_option_wins_over_the_configured_one() -> None:
    question = AskQuestion(question="q", agent="orchestrator", agent_options={"max_turns": 2})
    agent, _ = await tool_service(ScriptedInference(), default_max_turns=7).build_agent(question)
    assert isinstance(agent, ToolUsingAgent)
    assert agent.max_turns == 2


async def test_configured_max_turns_bounds_a_real_run_and_leaves_simple_alone() -> None:
    engine = calls_forever()
    answer = await tool_service(engine, default_max_turns=2).ask(
        AskQuestion(question="q", agent="orchestrator", tools=("think",))
    )
    assert answer.stop_reason == "max_turns"
    assert answer.turns == 3  # two tool turns, then the one tool-less final call
    assert [bool(request.tools) for request in engine.requests] == [True, True, False]
    simple = await service(ScriptedInference(["hi"]), default_max_turns=2).ask(
        AskQuestion(question="q")
    )
    assert simple.content == "hi"
