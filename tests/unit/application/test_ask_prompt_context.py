"""What the ask use case adds after the persona: project instructions for every agent but
the external runtimes, the skill catalogue and tool for agents that take tools."""

from __future__ import annotations

from jarvis.application.ask import AskQuestion, AskService, PromptContext
from jarvis.application.project_instructions import InstructionFile
from jarvis.application.registry import builtin_agents
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.testing import ScriptedInference
from jarvis.testing.skills import InMemorySkills

SKILL = "---\nname: greet\ndescription: How to greet a visitor.\n---\nSay hello twice.\n"


def instructions() -> list[InstructionFile]:
    return [InstructionFile(path="/repo/AGENTS.md", text="REPO-RULE")]


def service(engine: ScriptedInference, **context: object) -> AskService:
    return AskService(
        registry=builtin_agents(),
        inference=engine,
        persona=lambda selection: "" if selection == "none" else "## Agent Persona\n\nSOUL",
        context=PromptContext(**context),  # type: ignore[arg-type]
    )


def system_text(engine: ScriptedInference, index: int = 0) -> str:
    first = engine.requests[index].messages[0]
    assert first.role == "system"
    return first.content or ""


async def test_instructions_follow_the_persona_and_skills_follow_them() -> None:
    call = ToolCall(id="c1", name="skill", arguments={"name": "greet"})
    engine = ScriptedInference([Completion(content="", tool_calls=(call,)), "Hello, hello."])
    asked = service(engine, instructions=instructions, skills=InMemorySkills({"greet": SKILL}))
    answer = await asked.ask(AskQuestion(question="Greet", agent="orchestrator"))
    prompt = system_text(engine)
    persona, rule, catalogue = (
        prompt.index(text) for text in ("SOUL", "REPO-RULE", "- greet: How to greet")
    )
    assert persona < rule < catalogue
    assert answer.tool_results[0].content.endswith("Say hello twice.")


async def test_no_persona_still_gets_the_instructions_and_the_flag_leaves_them_out() -> None:
    engine = ScriptedInference(["a", "b", "c"])
    asked = service(engine, instructions=instructions, use_instructions=True)
    await asked.ask(AskQuestion(question="q", persona="none"))
    await asked.ask(AskQuestion(question="q", project_instructions=False))
    assert "REPO-RULE" in system_text(engine, 0)
    assert "REPO-RULE" not in system_text(engine, 1)
    off = service(engine, instructions=instructions, use_instructions=False)
    await off.ask(AskQuestion(question="q"))
    assert "REPO-RULE" not in system_text(engine, 2)
    assert off.instruction_files(AskQuestion(question="q")) == ()
    assert asked.instruction_files(AskQuestion(question="q")) == ("/repo/AGENTS.md",)


async def test_external_runtimes_are_not_given_the_instructions() -> None:
    engine = ScriptedInference(["x"])
    asked = service(engine, instructions=instructions, skills=InMemorySkills({"greet": SKILL}))
    for agent in ("opencode", "openhands", "claude_code"):
        built, _model = await asked.build_agent(AskQuestion(question="q", agent=agent))
        assert "REPO-RULE" not in built.prompts.persona_prompt
        assert "Available Skills" not in built.prompts.persona_prompt
    assert asked.instruction_files(AskQuestion(question="q", agent="opencode")) == ()


async def test_an_agent_without_tools_gets_no_skill_catalogue() -> None:
    engine = ScriptedInference(["x"])
    asked = service(engine, skills=InMemorySkills({"greet": SKILL}))
    await asked.ask(AskQuestion(question="q", agent="simple"))
    assert "Available Skills" not in system_text(engine)
