"""``native_openhands`` (CodeAct) over a scripted engine and the in-memory REPL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from jarvis.domain.agents.native_openhands import CodeActProtocol, NativeOpenHandsAgent
from jarvis.domain.errors import ContextTooLongError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.loop.context_window import estimate_tokens
from jarvis.domain.ports import ToolPort
from jarvis.domain.protocols.tool_protocol import FinalAnswer, ParseFailure, ToolCalls
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryRepl, InMemoryTool, ScriptedInference
from jarvis.testing.agents import build_agent


def tool(name: str, reply: str, parameter: str = "query", category: str = "test") -> InMemoryTool:
    spec = ToolSpec(
        name=name,
        description=f"The {name} tool.",
        parameters={
            "type": "object",
            "properties": {parameter: {"type": "string"}},
            "required": [parameter],
        },
        category=category,
    )
    return InMemoryTool(spec, lambda arguments: reply)


def agent(
    engine: ScriptedInference,
    *,
    repl: InMemoryRepl | None = None,
    tools: Sequence[ToolPort] = (),
    persona_prompt: str = "",
    **options: JSONValue,
) -> NativeOpenHandsAgent:
    return build_agent(
        NativeOpenHandsAgent,
        engine,
        repl=repl or InMemoryRepl(),
        tools=tools,
        persona_prompt=persona_prompt,
        options=options,
    )


async def test_a_python_block_runs_and_its_output_comes_back() -> None:
    engine = ScriptedInference(
        ["I will compute.\n```python\nx = 6 * 7\nprint(x)\n```\nOutput: 41", "Final Answer: 42"]
    )
    result = await agent(engine).arun("What is 6*7?")
    assert result.content == "42"
    assert result.turns == 2
    assert result.stop_reason == "final_answer"
    second = engine.requests[1].messages
    assert second[-2] == Message.assistant("I will compute.\n```python\nx = 6 * 7\nprint(x)\n```")
    assert second[-1] == Message.user("Execution output:\n42")
    assert result.tool_results[0].tool_name == "python"
    assert result.metadata["code_executions"] == 1


async def test_variables_persist_across_blocks_of_one_run() -> None:
    engine = ScriptedInference(
        ["```python\ntotal = 40\n```", "```python\ntotal + 2\n```", "Final Answer: done"]
    )
    await agent(engine).arun(
        "go",
    )
    assert engine.requests[2].messages[-1].content == "Execution output:\n42"


async def test_code_in_a_final_answer_is_shown_not_run() -> None:
    repl = InMemoryRepl()
    reply = "Final Answer: use this:\n```python\nimport os\nos.remove('x')\n```"
    result = await agent(ScriptedInference([reply]), repl=repl).arun("How do I delete x?")
    assert result.content == "use this:\n```python\nimport os\nos.remove('x')\n```"
    assert repl.sessions == []  # no interpreter was even started


async def test_an_action_is_dispatched_to_the_tool() -> None:
    search = tool("web_search", "Paris is the capital.")
    engine = ScriptedInference(
        [
            'Thought: look it up\nAction: web_search\nAction Input: {"query": "capital of France"}',
            "Final Answer: Paris",
        ]
    )
    result = await agent(engine, tools=[search]).arun("Capital of France?")
    assert result.content == "Paris"
    assert search.calls == [{"query": "capital of France"}]
    assert engine.requests[1].messages[-1].content == "Observation: Paris is the capital."


async def test_a_reply_with_neither_code_nor_action_is_the_answer() -> None:
    engine = ScriptedInference(["<think>easy</think>It is 4."])
    result = await agent(engine).arun("2+2?")
    assert result.content == "It is 4."
    assert result.turns == 1


async def test_defaults_and_request_settings() -> None:
    engine = ScriptedInference(["ok"])
    codeact = agent(engine)
    assert codeact.max_turns == 3
    assert codeact.max_tokens == 2048
    await codeact.arun("hi")
    assert engine.requests[0].max_tokens == 2048
    assert engine.requests[0].tools == ()  # a text protocol: any engine works


async def test_the_turn_budget_ends_with_a_final_request() -> None:
    engine = ScriptedInference(["```python\nprint(1)\n```"] * 3 + ["Final Answer: gave up"])
    result = await agent(engine).arun("loop")
    assert result.stop_reason == "max_turns"
    assert result.content == "gave up"
    assert result.turns == 4
    assert "Do not run code" in engine.requests[-1].messages[-1].content


async def test_the_system_prompt_has_tools_code_rules_and_the_persona() -> None:
    engine = ScriptedInference(["ok"])
    calculator = tool("calculator", "4", parameter="expression")
    await agent(engine, tools=[calculator], persona_prompt="## Agent Persona\n\nBe kind.").arun(
        "hi"
    )
    system = engine.requests[0].messages[0].content
    assert "```python" in system
    assert "### calculator" in system
    assert "Category: test" in system
    assert 'Action Input: {"expression": "<expression>"}' in system
    assert "tool_call(" in system
    assert system.endswith("## Agent Persona\n\nBe kind.")


async def test_without_a_repl_code_is_never_run() -> None:
    engine = ScriptedInference(["```python\nprint(1)\n```"])
    codeact = NativeOpenHandsAgent(engine, "m")
    result = await codeact.arun("hi")
    assert result.content == "```python\nprint(1)\n```"
    assert "Run code" not in engine.requests[0].messages[0].content


async def test_urls_are_fetched_first_and_inlined_keeping_everything_else() -> None:
    web = tool("web_search", "Example Domain. This domain is for examples.", category="search")
    engine = ScriptedInference(["Final Answer: It is an example page."])
    context = AgentContext(conversation=(Message.user("earlier"), Message.assistant("reply")))
    result = await agent(engine, tools=[web], persona_prompt="PERSONA").arun(
        "Summarise https://example.org/page.", context
    )
    assert web.calls == [{"query": "https://example.org/page"}]
    messages = engine.requests[0].messages
    assert [m.role for m in messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER]
    task = messages[-1].content
    assert task.startswith("Summarise https://example.org/page.")
    assert "--- Content from https://example.org/page ---\nExample Domain." in task
    assert messages[0].content.endswith("PERSONA")
    assert "### web_search" in messages[0].content
    assert result.tool_results[0].call_id == "prefetch_1"


async def test_a_failed_fetch_is_said_and_the_run_goes_on() -> None:
    refusing = InMemoryTool(
        ToolSpec(
            name="web_search",
            description="web",
            parameters={"type": "object", "properties": {"query": {"type": "string"}}},
            category="search",
        ),
        lambda arguments: "unused",
    )

    async def refuse(arguments: JSONObject) -> str:
        raise RuntimeError("private address refused")

    refusing._handler = refuse  # the fetch tool refuses, as its SSRF check would
    engine = ScriptedInference(["Final Answer: cannot read it"])
    await agent(engine, tools=[refusing]).arun("Read http://127.0.0.1/admin")
    assert "--- Could not fetch http://127.0.0.1/admin" in engine.requests[0].messages[-1].content


async def test_without_a_web_tool_urls_are_left_alone() -> None:
    engine = ScriptedInference(["ok"])
    await agent(engine).arun("see https://example.org")
    assert engine.requests[0].messages[-1].content == "see https://example.org"


async def test_long_observations_are_cut_oldest_first_to_fit_the_budget() -> None:
    replies = [f"```python\nprint('{n}' * 6000)\n```" for n in range(1, 3)] + ["Final Answer: ok"]
    engine = ScriptedInference(replies)
    codeact = agent(engine, max_prompt_tokens=2500, max_turns=5)
    await codeact.arun("Produce output.")
    last = engine.requests[-1].messages
    assert estimate_tokens(last) <= 2600
    assert last[0].role is Role.SYSTEM
    assert "How to act" in last[0].content
    assert last[1].content == "Produce output."
    assert "Earlier output removed" in last[3].content
    assert "2222" in last[-1].content


class OverflowingEngine(ScriptedInference):
    """Refuses any request longer than ``limit`` characters, like a small context window."""

    def __init__(self, replies: list[str], limit: int) -> None:
        super().__init__(replies)
        self.limit = limit
        self.refused = 0

    async def generate(self, request: InferenceRequest) -> Completion:
        if sum(len(m.content) for m in request.messages) > self.limit:
            self.refused += 1
            raise ContextTooLongError("prompt too long", engine="scripted")
        return await super().generate(request)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        if sum(len(m.content) for m in request.messages) > self.limit:
            self.refused += 1
            raise ContextTooLongError("prompt too long", engine="scripted")
        async for chunk in super().stream(request):
            yield chunk


async def test_a_context_overflow_shrinks_the_budget_and_retries() -> None:
    engine = OverflowingEngine(["```python\nprint('y' * 9000)\n```", "Final Answer: fine"], 7000)
    result = await agent(engine, max_prompt_tokens=8000).arun("Make output.")
    assert result.content == "fine"
    assert engine.refused >= 1


async def test_streaming_shows_only_the_answer() -> None:
    engine = ScriptedInference(["```python\nprint(2)\n```", "Final Answer: two"])
    updates = [u async for u in agent(engine).astream("q")]
    text = "".join(getattr(u, "text", "") for u in updates)
    assert text == "two"


def test_the_reading_rule() -> None:
    protocol = CodeActProtocol((), code_tool="python")

    def read(text: str) -> object:
        return protocol.interpret(Completion(content=text), turn=1)

    final = read("```python\nprint(1)\n```\nFinal Answer: 1")
    assert isinstance(final, FinalAnswer)
    assert final.content == "1"
    in_code = read("```python\nx = '''\nFinal Answer: not a label\n'''\n```")
    assert isinstance(in_code, ToolCalls)
    other = read("```bash\nls\n```")
    assert isinstance(other, FinalAnswer)
    first = read("```python\na = 1\n```\n```python\nb = 2\n```")
    assert isinstance(first, ToolCalls)
    assert first.calls[0].arguments == {"code": "a = 1\n"}
    unclosed = read("```python\nprint('cut off")
    assert isinstance(unclosed, ToolCalls)
    with_tools = CodeActProtocol(
        (ToolSpec(name="calculator", description="math"),), code_tool="python"
    )
    broken = with_tools.interpret(Completion(content="Action:\nAction Input: {}"), turn=1)
    assert isinstance(broken, ParseFailure)
