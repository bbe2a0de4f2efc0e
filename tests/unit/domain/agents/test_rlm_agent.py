"""The RLM agent over a scripted engine and the in-memory REPL: the context stays out of the
prompt, FINAL ends the run at once, sub-calls go to the sub-model concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jarvis.domain.agents.rlm import RecursiveLMAgent, RlmProtocol
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role
from jarvis.domain.loop.settings import SubModelSettings
from jarvis.domain.run.contract import AgentContext, MemoryHit
from jarvis.domain.run.updates import RunFinished
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryRepl, InMemoryTool, ScriptedInference
from jarvis.testing.agents import build_agent

SECRET = "the-needle-is-blue-42"


def code(body: str) -> str:
    return f"Let me work on it.\n```python\n{body}\n```"


def rlm(
    engine: ScriptedInference, *, system_prompt: str | None = None, **options: JSONValue
) -> RecursiveLMAgent:
    return build_agent(
        RecursiveLMAgent,
        engine,
        "root-model",
        repl=InMemoryRepl(),
        system_prompt=system_prompt,
        options=options,
    )


def with_context(text: str) -> AgentContext:
    return AgentContext(metadata={"context": text})


def root_requests(engine: ScriptedInference) -> list[InferenceRequest]:
    return [r for r in engine.requests if r.model == "root-model"]


async def test_the_context_lives_in_the_repl_never_in_the_prompt() -> None:
    big = ("filler line\n" * 90_000)[:1_000_000] + SECRET
    engine = ScriptedInference(
        [code("print(len(context))\nprint(context[-21:])"), code("FINAL(context[-21:])")]
    )
    result = await rlm(engine).arun("Find the needle.", with_context(big))
    assert result.content == SECRET
    assert result.stop_reason == "final_answer"
    for request in engine.requests:
        size = sum(len(m.content) for m in request.messages)
        assert size < 8_000, f"a request carried {size} characters"
        assert all("filler line\nfiller line" not in m.content for m in request.messages)
    task = engine.requests[0].messages[-1].content
    assert "1,000,021 characters" in task
    assert SECRET in engine.requests[1].messages[-1].content  # only what the code printed


async def test_memory_results_are_the_context_when_no_metadata_is_given() -> None:
    engine = ScriptedInference([code("FINAL(context)")])
    context = AgentContext(memory_results=(MemoryHit(content="first"), MemoryHit(content="second")))
    assert (await rlm(engine).arun("q", context)).content == "first\n\nsecond"


async def test_final_ends_the_run_at_once() -> None:
    engine = ScriptedInference([code("print('before')\nFINAL('done')\nprint('never')"), "unused"])
    agent = rlm(engine)
    result = await agent.arun("q", with_context("x"))
    assert result.content == "done"
    assert result.turns == 1
    assert len(engine.requests) == 1
    session = agent.repl
    assert isinstance(session, InMemoryRepl)
    assert "never" not in str(result.tool_results[0].content)


async def test_final_var_of_a_missing_variable_is_an_observation_not_an_empty_answer() -> None:
    engine = ScriptedInference(
        [code('FINAL_VAR("missing")'), code("answer = 'ok'\nFINAL_VAR('answer')")]
    )
    result = await rlm(engine).arun("q", with_context("x"))
    assert result.content == "ok"
    assert result.turns == 2
    feedback = engine.requests[1].messages[-1].content
    assert feedback.startswith("REPL output:")
    assert "no variable named 'missing'" in feedback
    assert result.tool_results[0].success is False


async def test_a_reply_without_code_is_the_answer() -> None:
    engine = ScriptedInference(["<think>hmm</think>The answer is 7."])
    result = await rlm(engine).arun("q", with_context("x"))
    assert result.content == "The answer is 7."
    assert result.turns == 1
    assert result.stop_reason == "final_answer"


async def test_a_bare_final_line_is_the_answer() -> None:
    engine = ScriptedInference(['FINAL("seven")'])
    assert (await rlm(engine).arun("q", with_context("x"))).content == "seven"


async def test_sub_calls_use_the_sub_model_settings() -> None:
    engine = ScriptedInference(
        [code("r = llm_query('summarise: ' + context[:5])\nprint(r)"), "sub answer", "Done."]
    )
    agent = rlm(engine, sub_model="small-model")
    result = await agent.arun("q", with_context("abcdefgh"))
    sub = [r for r in engine.requests if r.model == "small-model"]
    assert len(sub) == 1
    assert sub[0].temperature == 0.3
    assert sub[0].max_tokens == 1024
    assert [m.role for m in sub[0].messages] == [Role.USER]
    assert sub[0].messages[0].content == "summarise: abcde"
    assert "sub answer" in engine.requests[2].messages[-1].content
    assert result.metadata["sub_calls"] == 1
    assert root_requests(engine)[0].max_tokens == 2048


async def test_sub_model_defaults_to_the_root_model() -> None:
    engine = ScriptedInference([code("llm_query('x')"), "a", "Done."])
    await rlm(engine).arun("q", with_context("x"))
    assert all(r.model == "root-model" for r in engine.requests)


async def test_llm_query_with_a_non_string_is_an_error_observation() -> None:
    engine = ScriptedInference([code("llm_query(123)"), "Gave up."])
    result = await rlm(engine).arun("q", with_context("x"))
    assert result.content == "Gave up."
    assert "TypeError" in engine.requests[1].messages[-1].content


class SlowEngine:
    """Holds every sub-model request until ``together`` of them are running at once, counting
    them: concurrency is proven by the requests meeting, not by a stopwatch. Run one after
    another, the first would wait here until the bound and fail."""

    def __init__(self, root_replies: list[str], together: int) -> None:
        self.root = list(root_replies)
        self.together = together
        self.met = asyncio.Event()
        self.running = 0
        self.peak = 0
        self.sub_requests = 0

    @property
    def engine_id(self) -> str:
        return "slow"

    @property
    def base_url(self) -> str:
        return ""

    async def generate(self, request: InferenceRequest) -> Completion:
        if request.model == "root-model":
            return Completion(
                content=self.root.pop(0), usage=Usage(prompt_tokens=10, completion_tokens=5)
            )
        self.sub_requests += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        if self.running == self.together:
            self.met.set()
        try:
            await asyncio.wait_for(self.met.wait(), 60)
        finally:
            self.running -= 1
        return Completion(
            content=f"sub:{request.messages[0].content}",
            usage=Usage(prompt_tokens=3, completion_tokens=2),
        )

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        completion = await self.generate(request)
        yield StreamChunk(content=completion.content)
        yield StreamChunk(finish_reason="stop", usage=completion.usage)

    async def list_models(self) -> list[str]:
        return ["root-model"]

    async def health(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None


async def test_llm_batch_runs_its_sub_calls_concurrently_and_in_order() -> None:
    engine = SlowEngine(
        [code("answers = llm_batch([f'part {i}' for i in range(8)])\nFINAL(' | '.join(answers))")],
        together=8,
    )
    agent = RecursiveLMAgent(
        engine,
        "root-model",
        repl=InMemoryRepl(),
        sub_calls=SubModelSettings(model="sub-model", concurrency=8),
    )
    result = await agent.arun("q", with_context("x"))
    assert result.content == " | ".join(f"sub:part {i}" for i in range(8))
    assert engine.peak == 8  # all eight in flight at once
    assert result.usage.prompt_tokens == 10 + 8 * 3
    assert result.metadata["sub_calls"] == 8


async def test_the_sub_call_budget_is_enforced() -> None:
    engine = ScriptedInference([code("llm_batch(['a'] * 5)"), "Stopped."])
    result = await rlm(engine, max_sub_calls=3).arun("q", with_context("x"))
    assert "at most 3 sub-model calls" in engine.requests[1].messages[-1].content
    assert result.content == "Stopped."


async def test_repl_output_is_cut_to_max_output_chars() -> None:
    engine = ScriptedInference([code("print('z' * 50_000)"), "Done."])
    await rlm(engine).arun("q", with_context("x"))
    feedback = engine.requests[1].messages[-1].content
    assert len(feedback) < 10_000 + 200
    assert "truncated" in feedback
    engine = ScriptedInference([code("print('z' * 5_000)"), "Done."])
    await rlm(engine, max_output_chars=1000).arun("q", with_context("x"))
    assert len(engine.requests[1].messages[-1].content) < 1000 + 200


async def test_the_turn_budget_ends_gracefully() -> None:
    engine = ScriptedInference([code("x = 1")] * 3 + ["Best guess: 1"])
    result = await rlm(engine, max_turns=3).arun("q", with_context("x"))
    assert result.stop_reason == "max_turns"
    assert result.metadata["budget_exhausted"] == "turns"
    assert result.content == "Best guess: 1"
    assert result.turns == 4
    assert "Do not write code" in engine.requests[-1].messages[-1].content


async def test_the_defaults_are_the_originals() -> None:
    agent = rlm(ScriptedInference())
    assert agent.max_turns == 10
    assert agent.max_tokens == 2048
    assert agent.sub_calls.temperature == 0.3
    assert agent.sub_calls.max_tokens == 1024
    assert agent.max_output_chars == 10_000
    assert agent.accepts_tools


async def test_the_system_prompt_can_be_overridden_and_keeps_the_repl_instructions() -> None:
    engine = ScriptedInference(["Done."])
    await rlm(engine, system_prompt="You are terse.").arun("q", with_context("x"))
    system = engine.requests[0].messages[0].content
    assert system.startswith("You are terse.")
    assert "FINAL_VAR" in system
    assert "Recursive Language Model" not in system


async def test_tools_are_reachable_from_the_code() -> None:
    calculator = InMemoryTool(
        ToolSpec(
            name="calculator",
            description="math",
            parameters={"type": "object", "properties": {"expression": {"type": "string"}}},
        ),
        lambda arguments: "4",
    )
    engine = ScriptedInference([code("FINAL(tool_call('calculator', expression='2+2'))")])
    agent = RecursiveLMAgent(engine, "root-model", repl=InMemoryRepl(), tools=[calculator])
    result = await agent.arun("q", with_context("x"))
    assert result.content == "4"
    assert calculator.calls == [{"expression": "2+2"}]
    assert [r.tool_name for r in result.tool_results] == ["repl", "calculator"]
    assert "tool_call" in engine.requests[0].messages[0].content


async def test_a_repl_is_required() -> None:
    with pytest.raises(ConfigurationError, match="REPL"):
        RecursiveLMAgent(ScriptedInference(), "m")


async def test_streaming_ends_with_the_final_answer() -> None:
    engine = ScriptedInference([code("FINAL('streamed')")])
    updates = [u async for u in rlm(engine).astream("q", with_context("x"))]
    assert isinstance(updates[-1], RunFinished)
    assert updates[-1].result.content == "streamed"


async def test_each_run_gets_a_fresh_session_that_is_closed() -> None:
    repl = InMemoryRepl()
    engine = ScriptedInference([code("a = 1"), "one", code("print('a' in dir())"), "two"])
    agent = RecursiveLMAgent(engine, "root-model", repl=repl)
    await agent.arun("q", with_context("x"))
    await agent.arun("q", with_context("y"))
    assert len(repl.sessions) == 2
    assert "False" in engine.requests[3].messages[-1].content
    with pytest.raises(RuntimeError, match="closed"):
        await repl.sessions[0].execute("1")


def test_the_protocol_reads_repl_and_untagged_blocks() -> None:
    protocol = RlmProtocol((), repl_tool="repl", max_output_chars=100)
    for fence in ("```repl", "```", "```python", "```py"):
        decision = protocol.interpret(Completion(content=f"{fence}\nprint(1)\n```"), turn=1)
        assert decision.__class__.__name__ == "ToolCalls", fence
    shown = protocol.interpret(Completion(content="```json\n{}\n```\nThat is all."), turn=1)
    assert shown.__class__.__name__ == "FinalAnswer"
