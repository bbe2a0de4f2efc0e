"""think, llm and retrieval beyond the contract: what they send, show and refuse."""

from __future__ import annotations

from jarvis.application.tools.llm import LlmTool
from jarvis.application.tools.retrieval import NO_RESULTS, RetrievalTool
from jarvis.application.tools.think import ThinkTool
from jarvis.domain.errors import EngineUnavailableError
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.messages import Role
from jarvis.testing import InMemoryMemory, ScriptedInference


async def test_think_returns_the_thought_unchanged() -> None:
    result = await ThinkTool().execute({"thought": "  keep  spacing\n"})
    assert result.content == "  keep  spacing\n"


async def test_llm_sends_system_and_prompt_to_the_configured_model() -> None:
    engine = ScriptedInference(
        [Completion(content="Bonjour", usage=Usage(prompt_tokens=7, completion_tokens=2))]
    )
    tool = LlmTool(engine, "small-model", temperature=0.1, max_tokens=50)
    result = await tool.execute({"prompt": "Say hello in French.", "system": "One word."})
    assert result.content == "Bonjour"
    assert result.metadata == {
        "model": "small-model",
        "prompt_tokens": 7,
        "completion_tokens": 2,
    }
    [request] = engine.requests
    assert [(m.role, m.content) for m in request.messages] == [
        (Role.SYSTEM, "One word."),
        (Role.USER, "Say hello in French."),
    ]
    assert (request.model, request.temperature, request.max_tokens) == ("small-model", 0.1, 50)
    assert request.tools == ()


async def test_llm_without_system_sends_only_the_prompt() -> None:
    engine = ScriptedInference(["ok"])
    await LlmTool(engine, "m").execute({"prompt": "hi"})
    assert [m.role for m in engine.requests[0].messages] == [Role.USER]


async def test_an_engine_failure_is_a_failed_result() -> None:
    engine = ScriptedInference([EngineUnavailableError("connection refused", engine="x")])
    result = await LlmTool(engine, "m").execute({"prompt": "hi"})
    assert not result.success
    assert "the model call failed: connection refused" in result.content


async def test_retrieval_shows_numbered_hits_with_sources() -> None:
    memory = InMemoryMemory()
    await memory.store("Deploys happen on Tuesdays.", source="handbook.md")
    await memory.store("Deploys are frozen in December; deploys resume in January.")
    result = await RetrievalTool(memory).execute({"query": "deploys"})
    assert result.content == (
        "[1] source: unknown (score 2.00)\n"
        "Deploys are frozen in December; deploys resume in January.\n\n"
        "[2] source: handbook.md (score 1.00)\nDeploys happen on Tuesdays."
    )
    assert result.metadata == {"hits": 2}


async def test_retrieval_bounds_top_k_and_says_when_nothing_matches() -> None:
    memory = InMemoryMemory()
    for i in range(4):
        await memory.store(f"entry {i} about cats")
    tool = RetrievalTool(memory)
    assert (await tool.execute({"query": "cats", "top_k": 2})).metadata == {"hits": 2}
    assert (await tool.execute({"query": "cats", "top_k": 2.0})).metadata == {"hits": 2}
    assert (await tool.execute({"query": "dogs"})).content == NO_RESULTS
    for bad in (0, 21, "3", True):
        result = await tool.execute({"query": "cats", "top_k": bad})
        assert not result.success, bad
