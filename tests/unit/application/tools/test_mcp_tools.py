"""MCP tools as ordinary tools: names, descriptions, result mapping, start-up, restarts and
faults, on the in-memory MCP client (the SDK adapter passes the same contract)."""

from __future__ import annotations

import asyncio
import re

import pytest

from jarvis.application.mcp_config import McpServerEntry
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.mcp_tools import (
    DESCRIPTION_BUDGET,
    McpToolSource,
    brief,
    model_name,
    result_text,
)
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.mcp import (
    McpCallResult,
    McpClientPort,
    McpContent,
    McpServerSpec,
    McpToolInfo,
)
from jarvis.testing.inference import ScriptedInference
from jarvis.testing.mcp import REFERENCE_TOOLS, InMemoryMcpClient, McpHandler

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def entry(name: str, **extra: object) -> McpServerEntry:
    return McpServerEntry(spec=McpServerSpec(name=name, command="fake"), **extra)  # type: ignore[arg-type]


class Factory:
    """Makes fake clients by server name and keeps every one it made."""

    def __init__(self, tools: dict[str, dict[str, tuple[McpToolInfo, McpHandler]]]) -> None:
        self.tools = tools
        self.made: list[InMemoryMcpClient] = []
        self.fail: dict[str, str] = {}

    def __call__(self, spec: McpServerSpec) -> McpClientPort:
        client = InMemoryMcpClient(
            spec.name, self.tools.get(spec.name, {}), fail_start=self.fail.get(spec.name, "")
        )
        self.made.append(client)
        return client


def source_of(
    *entries: McpServerEntry, tools: dict[str, dict[str, tuple[McpToolInfo, McpHandler]]]
) -> tuple[McpToolSource, Factory, list[str]]:
    factory = Factory(tools)
    lines: list[str] = []
    return McpToolSource(entries, factory, report=lines.append), factory, lines


def test_model_names_are_valid_unique_and_case_insensitively_distinct() -> None:
    taken: set[str] = set()
    pairs = [
        ("fs", "read_file"),
        ("fs", "read.file"),
        ("fs", "read file"),
        ("fs_read", "file"),
        ("FS", "READ_FILE"),
        ("x", "y" * 200),
        ("x", "y" * 201),
        ("weird", "名前"),
    ]
    names = []
    for server, tool in pairs:
        name = model_name(server, tool, taken)
        taken.add(name.lower())
        names.append(name)
    assert names[0] == "fs_read_file"
    assert all(VALID.match(n) for n in names), names
    assert len({n.lower() for n in names}) == len(names)


def test_brief_cuts_at_a_sentence_or_word() -> None:
    text = "Read a file. It returns the whole content as text, with line numbers."
    assert brief(text, 200) == text
    assert brief(text, 20) == "Read a file."
    assert brief("word " * 40, 30).endswith("…")
    assert len(brief("word " * 40, 30)) <= 30


def test_a_hundred_tools_cost_at_most_the_description_budget() -> None:
    long = "Does one thing among a hundred. " * 20
    tools = {
        f"t{i}": (McpToolInfo(name=f"t{i}", description=long), REFERENCE_TOOLS["echo"][1])
        for i in range(100)
    }
    source, _, _ = source_of(entry("many"), tools={"many": tools})
    asyncio.run(source.prepare(["many"]))
    built = source.build(["many"])
    assert len(built) == 100
    total = sum(len(t.spec.description) for t in built)
    assert total <= DESCRIPTION_BUDGET
    assert total // 4 <= 2000  # about four characters a token


def test_result_text_describes_every_kind_of_block() -> None:
    result = McpCallResult(
        content=(
            McpContent(kind="text", text="hello"),
            McpContent(kind="image", mime_type="image/png", size_bytes=68),
            McpContent(kind="resource", uri="memo://a", mime_type="text/plain", text="kept"),
            McpContent(kind="resource", uri="blob://b", mime_type="application/pdf", size_bytes=9),
            McpContent(kind="resource_link", uri="file:///x", text="a file"),
        )
    )
    text = result_text(result)
    assert "hello" in text
    assert "[image: image/png, 68 bytes]" in text
    assert "[resource memo://a (text/plain)]\nkept" in text
    assert "[resource blob://b (application/pdf): 9 bytes]" in text
    assert "[resource link file:///x: a file]" in text
    assert result_text(McpCallResult(structured={"sum": 3})) == '{"sum": 3}'
    assert result_text(McpCallResult(is_error=True)) == "(the tool reported an error)"


async def test_tools_map_back_exactly_and_carry_their_hints() -> None:
    source, factory, _ = source_of(entry("ref"), tools={"ref": REFERENCE_TOOLS})
    await source.prepare(["ref"])
    tools = {t.spec.name: t for t in source.build(["ref"])}
    assert set(tools) == {f"ref_{name}" for name in REFERENCE_TOOLS}
    echo = tools["ref_echo"]
    assert echo.spec.read_only_hint is True
    assert echo.spec.destructive_hint is False
    assert echo.spec.side_effects is False
    assert tools["ref_hang"].spec.side_effects is True
    assert echo.spec.category == "mcp:ref"
    result = await echo.execute({"text": "hi"})
    assert (result.success, result.content, result.tool_name) == (True, "hi", "ref_echo")
    assert factory.made[0].calls == [("echo", {"text": "hi"})]
    failed = await tools["ref_fail"].execute({"message": "boom"})
    assert not failed.success
    assert "boom" in failed.content


async def test_enabled_and_disabled_tools_filter_what_is_offered() -> None:
    source, _, _ = source_of(
        entry("ref", enabled_tools=("echo", "add", "fail"), disabled_tools=("fail",)),
        tools={"ref": REFERENCE_TOOLS},
    )
    await source.prepare(["ref"])
    assert [t.spec.name for t in source.build(["ref"])] == ["ref_echo", "ref_add"]
    with pytest.raises(ConfigurationError, match="offers no tool 'fail'"):
        source.build(["ref.fail"])


async def test_servers_start_concurrently() -> None:
    barrier = asyncio.Barrier(2)

    class Meeting(InMemoryMcpClient):
        async def start(self) -> tuple[McpToolInfo, ...]:
            await barrier.wait()  # each start waits for the other: sequential starts hang
            return await super().start()

    def factory(spec: McpServerSpec) -> McpClientPort:
        return Meeting(spec.name, REFERENCE_TOOLS)

    source = McpToolSource([entry("a"), entry("b")], factory)
    await asyncio.wait_for(source.prepare(["a.echo", "b.echo"]), 30)
    assert [t.spec.name for t in source.build(["a.echo", "b.echo"])] == ["a_echo", "b_echo"]


async def test_a_server_that_cannot_start_gives_a_tool_that_fails_with_why() -> None:
    source, factory, lines = source_of(entry("down"), tools={})
    factory.fail["down"] = "MCP server 'down' could not start: no such command"
    await source.prepare(["down"])
    assert lines == ["MCP server 'down' could not start: no such command"]
    [stand_in] = source.build(["down"])
    assert stand_in.spec.name == "down"
    result = await stand_in.execute({})
    assert not result.success
    assert "no such command" in result.content
    [named] = source.build(["down.read_file"])
    result = await named.execute({})
    assert not result.success
    assert len(factory.made) == 1  # not started again within the run


async def test_a_crashed_server_restarts_at_most_max_restarts_times_per_run() -> None:
    source, factory, lines = source_of(entry("ref", max_restarts=2), tools={"ref": REFERENCE_TOOLS})
    await source.prepare(["ref"])
    tools = {t.spec.name: t for t in source.build(["ref"])}
    for _ in range(3):
        crashed = await tools["ref_crash"].execute({})
        assert not crashed.success
        assert "died" in crashed.content
    assert len(factory.made) == 3  # the first, then two restarts
    refused = await tools["ref_echo"].execute({"text": "x"})
    assert not refused.success
    assert "restarted 2 times" in refused.content
    assert len(factory.made) == 3
    assert len(lines) == 3  # one line per fault
    await source.prepare(["ref"])  # a new run: restarts again
    again = await tools["ref_echo"].execute({"text": "back"})
    assert again.content == "back"


async def test_a_call_that_times_out_is_a_failed_result() -> None:
    spec = McpServerSpec(name="ref", command="fake", timeout=0.2)
    source = McpToolSource(
        [McpServerEntry(spec=spec)], lambda s: InMemoryMcpClient(s.name, REFERENCE_TOOLS)
    )
    await source.prepare(["ref.hang"])
    [hang] = source.build(["ref.hang"])
    assert hang.spec.timeout_seconds > spec.timeout  # the client's timeout fires first
    result = await hang.execute({"marker": "m"})
    assert not result.success
    assert "did not answer" in result.content


async def test_the_catalogue_offers_servers_and_single_tools_beside_its_own() -> None:
    source, _, _ = source_of(entry("ref"), entry("calculator"), tools={"ref": REFERENCE_TOOLS})
    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(source)
    assert catalogue.validate(["ref", "ref.echo", "calculator"]) == (
        "ref",
        "ref.echo",
        "calculator",
    )
    with pytest.raises(ConfigurationError, match="MCP servers: calculator, ref"):
        catalogue.validate(["nothing"])
    names = ["calculator", "ref.echo", "ref.add"]
    await catalogue.prepare(names)
    built = catalogue.build(names, inference=ScriptedInference([]), model="m")
    assert [t.spec.name for t in built] == ["calculator", "ref_echo", "ref_add"]
    assert built[0].spec.category != "mcp:calculator"  # the catalogue's own tool wins


async def test_no_mcp_tool_takes_a_catalogue_tools_name() -> None:
    tools: dict[str, tuple[McpToolInfo, McpHandler]] = {
        "interpreter": (McpToolInfo(name="interpreter"), REFERENCE_TOOLS["echo"][1])
    }
    source, _, _ = source_of(entry("code"), tools={"code": tools})
    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(source)
    source.reserve(["code_interpreter"])
    await catalogue.prepare(["code"])
    [tool] = catalogue.build(["code"], inference=ScriptedInference([]), model="m")
    assert tool.spec.name != "code_interpreter"
    assert VALID.match(tool.spec.name)


async def test_runs_that_start_at_once_start_a_server_once() -> None:
    made: list[InMemoryMcpClient] = []

    class Yielding(InMemoryMcpClient):
        async def start(self) -> tuple[McpToolInfo, ...]:
            await asyncio.sleep(0)  # the other runs get to ask meanwhile
            return await super().start()

    def factory(spec: McpServerSpec) -> McpClientPort:
        made.append(Yielding(spec.name, REFERENCE_TOOLS))
        return made[-1]

    source = McpToolSource([entry("ref")], factory)
    await asyncio.gather(*(source.prepare(["ref.echo"]) for _ in range(5)))
    assert len(made) == 1


async def test_no_mcp_tool_takes_a_plug_in_tools_name() -> None:
    """A plug-in's tool ``ref_echo`` and server ``ref``'s ``echo``: the MCP tool is named
    otherwise (two tools of one name would fail the whole run)."""
    from jarvis.application.plugins import PluginError
    from jarvis.domain.loop.base import BaseAgent
    from jarvis.domain.tools.specs import ToolSpec
    from jarvis.testing.tools import InMemoryTool

    class Plugins:
        def agent_names(self) -> list[str]:
            return []

        def load_agent(self, name: str) -> type[BaseAgent]:
            raise PluginError("p", "no agents")

        def tool_names(self) -> list[str]:
            return ["ref_echo"]

        def load_tool(self, name: str) -> InMemoryTool:
            return InMemoryTool(ToolSpec(name=name, description="A plug-in's tool."))

        def failures(self) -> list[PluginError]:
            return []

    source, _, _ = source_of(entry("ref"), tools={"ref": REFERENCE_TOOLS})
    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(source)
    catalogue.use_plugins(Plugins())
    await catalogue.prepare(["ref", "ref_echo"])
    built = catalogue.build(["ref", "ref_echo"], inference=ScriptedInference([]), model="m")
    names = [tool.spec.name for tool in built]
    assert len(names) == len(set(names)), names
    assert "ref_echo" in names  # the plug-in's
    assert any(name.startswith("ref_echo") and name != "ref_echo" for name in names), names
