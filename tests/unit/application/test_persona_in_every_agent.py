"""Every registered agent gets the persona, after its own protocol prompt, never instead."""

from __future__ import annotations

import pytest

from jarvis.application.ask import AskQuestion, AskService
from jarvis.application.registry import builtin_agents
from jarvis.application.system_prompt import SystemPromptBuilder
from jarvis.domain.llm.messages import Role
from jarvis.domain.ports import PersonaFile
from jarvis.testing import InMemoryPersonaStore, InMemoryRepl, ScriptedInference

EXTERNAL_RUNTIMES = {"claude_code", "opencode", "openhands", "sandboxed"}
"""Agents that hand the question to another runtime instead of calling the engine; they
pass the persona on in their own way and are tested with their adapters."""
OPERATIVES = {"operative", "monitor_operative"}
"""Agents that run only as operators (their state follows the persona in the system
prompt); tested in test_operative_agent.py."""
AGENTS = [key for key, _ in builtin_agents() if key not in EXTERNAL_RUNTIMES | OPERATIVES]
PERSONA = "## Agent Persona\n\nAlways answer in French.\n\n## Agent Memory\n\n- likes tea"


def persona_builder() -> SystemPromptBuilder:
    store = InMemoryPersonaStore()
    store.put(PersonaFile.SOUL, "Always answer in French.\n")
    store.put(PersonaFile.MEMORY, "- likes tea\n")
    return SystemPromptBuilder(store)


async def system_prompt_sent(
    agent: str, *, persona: str | None = None, system: str | None = None, with_persona: bool = True
) -> str:
    engine = ScriptedInference(["Final Answer: bonjour"])
    service = AskService(
        registry=builtin_agents(),
        inference=engine,
        persona=persona_builder() if with_persona else None,
        repl=InMemoryRepl(),  # the agents that run code need one
    )
    await service.ask(
        AskQuestion(question="hi", agent=agent, persona=persona, system_prompt=system)
    )
    first = engine.requests[0].messages[0]
    assert first.role is Role.SYSTEM
    return first.content


def test_the_builtin_agents_include_the_tool_loops() -> None:
    assert {"simple", "orchestrator", "native_react"} <= set(AGENTS)


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_persona_is_appended_after_the_agents_own_prompt(agent: str) -> None:
    own = await system_prompt_sent(agent, with_persona=False)
    full = await system_prompt_sent(agent)
    assert PERSONA not in own
    assert full == own + "\n\n" + PERSONA


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_system_override_keeps_the_persona(agent: str) -> None:
    full = await system_prompt_sent(agent, system="You are a pirate.")
    assert full.startswith("You are a pirate.")
    assert full.endswith(PERSONA)


@pytest.mark.parametrize("agent", AGENTS)
async def test_persona_none_sends_only_the_agents_own_prompt(agent: str) -> None:
    own = await system_prompt_sent(agent, with_persona=False)
    assert await system_prompt_sent(agent, persona="none") == own


async def test_the_react_protocol_survives_the_persona() -> None:
    full = await system_prompt_sent("react")
    assert "Final Answer" in full.split("## Agent Persona")[0]


async def test_the_structured_orchestrator_keeps_its_json_protocol_and_the_persona() -> None:
    """The original dropped the structured-mode instructions when a persona was set."""
    engine = ScriptedInference(['{"thought": "done", "final_answer": "bonjour"}'])
    service = AskService(registry=builtin_agents(), inference=engine, persona=persona_builder())
    answer = await service.ask(
        AskQuestion(question="hi", agent="orchestrator", agent_options={"mode": "structured"})
    )
    assert answer.content == "bonjour"
    system = engine.requests[0].messages[0].content
    protocol, persona = system.split("## Agent Persona")
    assert '"final_answer"' in protocol
    assert persona.endswith("- likes tea")
