"""The ``sandboxed`` agent over the real inside (the worker the image runs), in process.

The "container" is :class:`tests.support.inprocess_sandbox.InProcessContainers`: the host
side and the inside speak the real protocol over queues of lines. Hostile insides play a
container that floods or lies; each must be killed and reported, never believed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from jarvis.application.ask import Answer, AskQuestion, AskService
from jarvis.application.config import JarvisConfig
from jarvis.application.sandbox_runner import ContainerRunner
from jarvis.domain.agents.sandboxed import SandboxedAgent
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.run.updates import TextDelta
from jarvis.domain.sandbox.client import LineSink
from jarvis.domain.sandbox.host import HostBounds
from jarvis.domain.sandbox.protocol import RunMessage
from jarvis.domain.sandbox.runner import SandboxRunError
from jarvis.domain.tools.specs import ToolSpec
from jarvis.entrypoints.composition import bootstrap
from jarvis.testing import InMemoryTool, ScriptedInference
from tests.support.inprocess_sandbox import InProcessContainers

ReadLine = Callable[[], Awaitable[str | None]]


def calc_call(expression: str) -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id="c1", name="calculator", arguments={"expression": expression}),),
        finish_reason="tool_calls",
    )


def service_for(
    engine: ScriptedInference, runtime: InProcessContainers, *user_tools: InMemoryTool
) -> AskService:
    container = bootstrap(JarvisConfig(), inference=engine).container
    container.persona.override(lambda _name: "PERSONA-FROM-HOST")
    container.container_runtime.override(runtime)
    container.user_tools().extend(user_tools)
    if not container.agents().contains("sandboxed"):
        container.agents().register("sandboxed", SandboxedAgent)
    return container.ask_service()


async def test_a_sandboxed_orchestrator_runs_its_tools_inside_and_asks_the_host() -> None:
    engine = ScriptedInference([calc_call("6*7"), "It is 42."])
    runtime = InProcessContainers()
    service = service_for(engine, runtime)
    command = AskQuestion(
        question="What is 6*7?",
        agent="sandboxed",
        model="m",
        tools=("calculator",),
        agent_options={"inner": "orchestrator", "secrets": {"API_TOKEN": "tok-123456"}},
    )
    texts: list[str] = []
    answer = None
    async for update in service.stream(command):
        if isinstance(update, TextDelta):
            texts.append(update.text)
        elif isinstance(update, Answer):
            answer = update
    assert answer is not None
    assert answer.content == "It is 42."
    assert "".join(texts) == "It is 42."
    assert [r.content for r in answer.tool_results] == ["42"]
    assert answer.turns == len(engine.requests) == 2
    # the host built the persona and the tools travelled as specs to the host engine
    assert "PERSONA-FROM-HOST" in engine.requests[0].messages[0].content
    assert [t.name for t in engine.requests[0].tools] == ["calculator"]
    (sandbox,) = runtime.started
    assert sandbox.removed
    assert not sandbox.spec.network
    run = json.loads(sandbox.sent[0])
    assert run["type"] == "run"
    assert run["secrets"] == {"API_TOKEN": "tok-123456"}
    # secrets only in the payload: not in the spec's command line, labels or environment
    assert "tok-123456" not in json.dumps([sandbox.spec.command, sandbox.spec.labels])


async def test_a_sandboxed_run_is_not_offered_the_hosts_skills() -> None:
    from jarvis.application.ask import PromptContext
    from jarvis.testing.skills import InMemorySkills

    skill = "---\nname: greet\ndescription: Greeting rules.\n---\nSay hi.\n"
    engine = ScriptedInference(["Hi.", "Hi."])
    runtime = InProcessContainers()
    container = bootstrap(JarvisConfig(), inference=engine).container
    container.container_runtime.override(runtime)
    container.prompt_context.override(PromptContext(skills=InMemorySkills({"greet": skill})))
    if not container.agents().contains("sandboxed"):
        container.agents().register("sandboxed", SandboxedAgent)
    service = container.ask_service()
    plain = AskQuestion(question="Hello", agent="orchestrator", model="m")
    await service.ask(plain)
    inside = AskQuestion(
        question="Hello", agent="sandboxed", model="m", agent_options={"inner": "orchestrator"}
    )
    await service.ask(inside)
    assert "- greet: Greeting rules." in (engine.requests[0].messages[0].content or "")
    assert [t.name for t in engine.requests[0].tools] == ["skill"]
    assert "Available Skills" not in (engine.requests[1].messages[0].content or "")
    assert not engine.requests[1].tools


async def test_host_tools_need_explicit_permission_and_run_on_the_host() -> None:
    spec = ToolSpec(
        name="lookup",
        description="look up",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    lookup = InMemoryTool(spec, lambda args: f"found {args['q']}")
    runtime = InProcessContainers()
    call = Completion(
        content="",
        tool_calls=(ToolCall(id="t", name="lookup", arguments={"q": "x"}),),
        finish_reason="tool_calls",
    )
    service = service_for(ScriptedInference([call, "done"]), runtime, lookup)
    refused = AskQuestion(
        question="q",
        agent="sandboxed",
        model="m",
        tools=("lookup",),
        agent_options={"inner": "orchestrator"},
    )
    with pytest.raises(ConfigurationError, match="host_tools=lookup"):
        await service.ask(refused)
    assert runtime.started == []  # refused before any container started
    allowed = AskQuestion(
        question="q",
        agent="sandboxed",
        model="m",
        agent_options={"inner": "orchestrator", "host_tools": "lookup"},
    )
    answer = await service.ask(allowed)
    assert answer.content == "done"
    assert lookup.calls == [{"q": "x"}]
    assert [r.content for r in answer.tool_results] == ["found x"]


async def test_an_engine_error_on_the_host_is_the_same_error_on_the_host() -> None:
    engine = ScriptedInference([EngineUnavailableError("down", engine="scripted", url="http://e")])
    service = service_for(engine, InProcessContainers())
    with pytest.raises(EngineUnavailableError) as raised:
        await service.ask(AskQuestion(question="q", agent="sandboxed", model="m"))
    assert raised.value.url == "http://e"


async def test_bad_inner_options_are_a_usage_error_before_a_container_starts() -> None:
    runtime = InProcessContainers()
    service = service_for(ScriptedInference(), runtime)
    with pytest.raises(ConfigurationError):
        await service.ask(
            AskQuestion(
                question="q",
                agent="sandboxed",
                model="m",
                agent_options={"inner": "orchestrator", "mode": "magic"},
            )
        )
    with pytest.raises(ConfigurationError, match="--mount"):
        await service.ask(AskQuestion(question="q", agent="simple", model="m", mounts=("/x",)))
    assert runtime.started == []


# --- hostile insides --------------------------------------------------------------------


def hostile(*lines: str, stay: bool = False) -> Callable[[ReadLine, LineSink], Awaitable[int]]:
    async def inside(read_line: ReadLine, sink: LineSink) -> int:
        await read_line()
        for line in lines:
            await sink.write_line(line)
        if stay:
            await asyncio.Event().wait()
        return 0

    return inside


def agent_on(
    inside: Callable[[ReadLine, LineSink], Awaitable[int]], **bounds: int
) -> tuple[SandboxedAgent, InProcessContainers]:
    runtime = InProcessContainers(inside)
    inner = SimpleAgent(ScriptedInference(["hello"]), "m")
    agent = SandboxedAgent(
        inner,
        ContainerRunner(runtime),
        secrets={"TOKEN": "very-secret-value"},
        bounds=HostBounds(**bounds),
    )
    return agent, runtime


ASK = json.dumps(
    {
        "type": "inference",
        "id": 1,
        "request": {
            "messages": [{"role": "user", "content": "x"}],
            "model": "m",
            "temperature": 0,
            "max_tokens": 4,
        },
    }
)
RESULT = json.dumps(
    {
        "type": "result",
        "content": "ok",
        "turns": 999999,
        "usage": {"prompt_tokens": 10**9, "completion_tokens": 10**9},
    }
)


@pytest.mark.parametrize(
    ("lines", "bounds", "said"),
    [
        (["not json"], {}, "not a protocol message"),
        (
            ['{"type": "text", "text": "' + "a" * 200 + '"}'],
            {"max_line_chars": 100},
            "line of more",
        ),
        (['{"type": "text", "text": "a"}'] * 50, {"max_lines": 10}, "more than 10 lines"),
        ([json.dumps({"type": "tool", "id": 1, "name": "web_search"})], {}, "never allowed"),
        ([ASK, ASK], {}, "used twice"),
        (
            [ASK.replace('"id": 1', f'"id": {n}') for n in range(1, 6)],
            {"max_in_flight": 2},
            "in flight",
        ),
    ],
)
async def test_a_container_that_floods_or_lies_is_killed_and_reported(
    lines: list[str], bounds: dict[str, int], said: str
) -> None:
    agent, runtime = agent_on(hostile(*lines, stay=True), **bounds)
    with pytest.raises(SandboxRunError, match=said) as raised:
        await agent.arun("q")
    assert raised.value.reason == "protocol"
    assert runtime.started[0].removed


async def test_the_host_counts_turns_and_usage_itself() -> None:
    agent, _ = agent_on(hostile(RESULT))
    result = await agent.arun("q")
    assert result.content == "ok"
    assert result.turns == 0
    assert result.usage.total_tokens == 0


async def test_an_early_exit_is_reported_with_secrets_redacted() -> None:
    async def leaks(read_line: ReadLine, sink: LineSink) -> int:
        run = RunMessage.model_validate_json(await read_line() or "")
        await sink.write_line(
            json.dumps(
                {"type": "error", "kind": "unexpected", "message": "boom " + run.secrets["TOKEN"]}
            )
        )
        return 1

    agent, _ = agent_on(leaks)
    with pytest.raises(SandboxRunError) as raised:
        await agent.arun("q")
    assert "very-secret-value" not in str(raised.value)
    assert "[secret]" in str(raised.value)


async def test_a_run_past_its_timeout_is_removed_and_reported() -> None:
    runtime = InProcessContainers(hostile(stay=True))
    from jarvis.domain.sandbox.runner import SandboxLimits

    agent = SandboxedAgent(
        SimpleAgent(ScriptedInference(), "m"),
        ContainerRunner(runtime, limits=SandboxLimits(timeout=0.2)),
    )
    with pytest.raises(SandboxRunError, match="timeout") as raised:
        await agent.arun("q")
    assert raised.value.reason == "timed_out"
    assert runtime.started[0].removed


async def test_a_container_that_ends_without_answering_is_reported() -> None:
    agent, _ = agent_on(hostile())
    with pytest.raises(SandboxRunError, match="exited with code 0") as raised:
        await agent.arun("q")
    assert raised.value.reason == "exited"


async def test_mcp_tools_run_on_the_host_only_when_named_in_host_tools() -> None:
    from dependency_injector import providers

    from jarvis.application.mcp_config import McpServerEntry
    from jarvis.application.tools.mcp_tools import McpToolSource
    from jarvis.domain.json_types import JSONValue
    from jarvis.domain.mcp import McpServerSpec
    from jarvis.testing.mcp import InMemoryMcpClient, reference_client

    made: list[InMemoryMcpClient] = []

    def client(spec: McpServerSpec) -> InMemoryMcpClient:
        made.append(reference_client(spec.name))
        return made[-1]

    runtime = InProcessContainers()
    call = Completion(
        content="",
        tool_calls=(ToolCall(id="t", name="ref_echo", arguments={"text": "from inside"}),),
        finish_reason="tool_calls",
    )
    container = bootstrap(JarvisConfig(), inference=ScriptedInference([call, "done"])).container
    container.persona.override(lambda _name: "")
    container.container_runtime.override(runtime)
    source = McpToolSource([McpServerEntry(spec=McpServerSpec(name="ref", command="x"))], client)
    container.mcp_tools.override(providers.Object(source))
    if not container.agents().contains("sandboxed"):
        container.agents().register("sandboxed", SandboxedAgent)
    service = container.ask_service()
    options: dict[str, JSONValue] = {"inner": "orchestrator"}
    refused = AskQuestion(
        question="q", agent="sandboxed", model="m", tools=("ref.echo",), agent_options=options
    )
    with pytest.raises(ConfigurationError, match=r"host_tools=ref\.echo"):
        await service.ask(refused)
    assert runtime.started == []
    allowed = AskQuestion(
        question="q",
        agent="sandboxed",
        model="m",
        agent_options={"inner": "orchestrator", "host_tools": "ref.echo"},
    )
    answer = await service.ask(allowed)
    assert answer.content == "done"
    assert [c.calls for c in made if c.calls] == [[("echo", {"text": "from inside"})]]
    await source.aclose()
