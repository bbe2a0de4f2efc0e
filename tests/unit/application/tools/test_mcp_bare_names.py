"""A bare MCP tool name (``echo``, as OpenJarvis's tool lists name MCP tools) in a run's
tool names: the one server that offers it, on the in-memory MCP client."""

from __future__ import annotations

import pytest

from jarvis.application.mcp_config import McpServerEntry
from jarvis.application.tools.catalogue import ToolCatalogue
from jarvis.application.tools.mcp_tools import McpToolSource
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.mcp import McpClientPort, McpServerSpec, McpToolInfo
from jarvis.testing.inference import ScriptedInference
from jarvis.testing.mcp import REFERENCE_TOOLS, InMemoryMcpClient


def entry(name: str, **extra: object) -> McpServerEntry:
    return McpServerEntry(spec=McpServerSpec(name=name, command="fake"), **extra)  # type: ignore[arg-type]


class Factory:
    def __init__(self, *, down: tuple[str, ...] = ()) -> None:
        self.started: list[str] = []
        self.down = down

    def __call__(self, spec: McpServerSpec) -> McpClientPort:
        self.started.append(spec.name)
        fail = f"MCP server '{spec.name}' could not start: gone" if spec.name in self.down else ""
        return InMemoryMcpClient(spec.name, REFERENCE_TOOLS, fail_start=fail)


def catalogue_of(
    *entries: McpServerEntry, down: tuple[str, ...] = ()
) -> tuple[ToolCatalogue, Factory]:
    factory = Factory(down=down)
    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(McpToolSource(entries, factory))
    return catalogue, factory


async def test_a_bare_name_is_the_tool_of_the_one_server_that_offers_it() -> None:
    catalogue, factory = catalogue_of(entry("ref"), entry("sums", enabled_tools=("add",)))
    await catalogue.prepare(["think", "echo"])
    assert factory.started == ["ref"]  # sums cannot offer echo: not started
    assert catalogue.validate(["think", "echo", "ref.echo"]) == ("think", "ref.echo")
    built = catalogue.build(["think", "echo"], inference=ScriptedInference([]), model="m")
    assert [tool.spec.name for tool in built] == ["think", "ref_echo"]
    assert (await built[1].execute({"text": "hi"})).content == "hi"


async def test_a_catalogue_tool_wins_over_a_server_tool_of_its_name() -> None:
    calculator = McpToolInfo(name="calculator", description="The server's own.")
    tools = {**REFERENCE_TOOLS, "calculator": (calculator, REFERENCE_TOOLS["echo"][1])}
    factory_made: list[str] = []

    def factory(spec: McpServerSpec) -> McpClientPort:
        factory_made.append(spec.name)
        return InMemoryMcpClient(spec.name, tools)

    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(McpToolSource([entry("ref")], factory))
    await catalogue.prepare(["calculator"])
    assert factory_made == []  # a catalogue tool's name looks up no server
    assert catalogue.validate(["calculator"]) == ("calculator",)
    await catalogue.prepare(["ref.calculator"])
    assert catalogue.validate(["ref.calculator"]) == ("ref.calculator",)


async def test_a_bare_name_two_servers_offer_is_refused_naming_both() -> None:
    catalogue, _ = catalogue_of(
        entry("left"), entry("right"), entry("other", disabled_tools=("echo",))
    )
    await catalogue.prepare(["echo"])
    with pytest.raises(
        ConfigurationError, match=r"more than one MCP server: left\.echo, right\.echo\."
    ) as caught:
        catalogue.validate(["echo"])
    assert caught.value.hint == "Name the one meant: left.echo or right.echo."
    assert catalogue.validate(["left.echo"]) == ("left.echo",)


async def test_a_bare_name_of_a_server_that_did_not_start_fails_when_called() -> None:
    catalogue, _ = catalogue_of(entry("down"), down=("down",))
    await catalogue.prepare(["echo"])
    assert catalogue.validate(["echo"]) == ("down.echo",)
    [stand_in] = catalogue.build(["echo"], inference=ScriptedInference([]), model="m")
    result = await stand_in.execute({"text": "x"})
    assert not result.success
    assert "could not start: gone" in result.content


async def test_a_bare_name_no_server_offers_is_unknown() -> None:
    catalogue, _ = catalogue_of(entry("ref"))
    await catalogue.prepare(["nothing"])
    with pytest.raises(ConfigurationError, match="Unknown tool: 'nothing'"):
        catalogue.validate(["nothing"])


async def test_resolve_starts_only_the_servers_a_bare_name_needs() -> None:
    catalogue, factory = catalogue_of(entry("ref"), entry("sums", enabled_tools=("add",)))
    assert await catalogue.resolve(["ref", "sums.add", "think"]) == ("ref", "sums.add", "think")
    assert factory.started == []
    assert await catalogue.resolve(["echo"]) == ("ref.echo",)
    assert factory.started == ["ref"]


async def test_a_server_that_started_with_no_tools_gives_no_stand_in() -> None:
    source = McpToolSource([entry("empty")], lambda spec: InMemoryMcpClient(spec.name, {}))
    catalogue = ToolCatalogue.with_builtins()
    catalogue.attach_mcp(source)
    await catalogue.prepare(["echo"])
    with pytest.raises(ConfigurationError, match="Unknown tool: 'echo'"):
        catalogue.validate(["echo"])


async def test_a_bare_name_two_servers_that_did_not_start_could_offer_is_refused() -> None:
    """A mistyped name with two servers down was a stand-in of each (``mcp1_calculater``,
    ``mcp2_calculater``): which server has it cannot be told, as with two that offer it."""
    catalogue, _ = catalogue_of(entry("one"), entry("two"), down=("one", "two"))
    await catalogue.prepare(["calculater"])
    with pytest.raises(ConfigurationError, match=r"one, two could not start") as caught:
        catalogue.validate(["calculater"])
    assert "SERVER.TOOL" in caught.value.hint


async def test_a_name_stored_for_later_runs_is_never_a_guess() -> None:
    """``operators add --tools echo`` with the one server that could offer it down: a run
    may get a stand-in, a stored name would keep the guess for good."""
    catalogue, _ = catalogue_of(entry("down"), down=("down",))
    with pytest.raises(ConfigurationError, match="down could not start"):
        await catalogue.resolve(["echo"])
