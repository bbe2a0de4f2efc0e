"""Tools from MCP servers: what jarvis adds to a call, what a server costs to start, what
its tool descriptions cost in a prompt.

* one call of the reference server's ``echo`` (the ``mcp`` SDK's MCPServer over stdio,
  ``tests/support/mcp_reference_server.py``) through jarvis (the tool executor: argument
  validation, events, the output bound; the MCP tool; the SDK adapter) against the same
  call made with the bare ``mcp`` client (``stdio_client`` + ``ClientSession.call_tool``)
  to a second copy of the server, the two alternated call by call;
* start-up to the tool list: the reference server, and the npm ``server-everything`` when
  scripts/lib/install.sh installed it;
* the descriptions of 100 tools of one server as the model is given them, in tokens of the
  embedded model's tokenizer (SmolLM2's, when installed; else characters / 4).

Run alone with ``python -m bench.bench_mcp [--quick]``, or by ``python -m bench.run``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, BenchContext, Row
from jarvis.adapters.mcp_sdk import McpSdkClient
from jarvis.application.mcp_config import McpServerEntry
from jarvis.application.tools.mcp_tools import McpToolSource
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.mcp import McpServerSpec, McpToolInfo
from jarvis.testing.mcp import REFERENCE_TOOLS, InMemoryMcpClient, McpHandler

SERVER = str(ROOT / "tests" / "support" / "mcp_reference_server.py")
MCP_SERVERS_VERSION = "2026.8.31"


def _spec() -> McpServerSpec:
    return McpServerSpec(name="ref", command=sys.executable, args=(SERVER,))


async def call_rows(quick: bool) -> list[Row]:
    """Both connections open at once, their calls alternated one by one: each pair runs at
    the same moment of a shared machine, so the difference is jarvis's and not noise."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    calls = 300 if quick else 2000
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    source = McpToolSource([McpServerEntry(spec=_spec())], McpSdkClient)
    bare: list[float] = []
    through: list[float] = []
    try:
        await source.prepare(["ref.echo"])
        executor = ToolExecutor(source.build(["ref.echo"]))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(calls):
                arguments: JSONObject = {"text": f"hello {i}"}
                started = time.perf_counter()
                await session.call_tool("echo", dict(arguments))
                middle = time.perf_counter()
                result = await executor.execute(
                    ToolCall(id=f"c{i}", name="ref_echo", arguments=arguments)
                )
                ended = time.perf_counter()
                assert result.success, result.content
                if i >= 20:  # warm-up left out
                    bare.append(middle - started)
                    through.append(ended - middle)
    finally:
        await source.aclose()
    bare_p50, jarvis_p50 = statistics.median(bare), statistics.median(through)
    overhead_ms = statistics.median(j - b for j, b in zip(through, bare, strict=True)) * 1000
    return [
        Row(
            name="MCP tool call (echo, stdio) through jarvis, p50",
            value=jarvis_p50 * 1000,
            unit="ms",
            baseline=bare_p50 * 1000,
            baseline_name="bare mcp ClientSession.call_tool",
            goal="overhead <= 1 ms",
            ok=overhead_ms <= 1.0,
            note=f"overhead (median of paired differences) {overhead_ms:+.3f} ms; "
            f"{len(through)} pairs",
        )
    ]


async def _start_once(spec: McpServerSpec) -> float:
    client = McpSdkClient(spec)
    started = time.perf_counter()
    try:
        await client.start()
        return time.perf_counter() - started
    finally:
        await client.aclose()


def _everything() -> McpServerSpec | None:
    runtimes = Path(
        os.environ.get("JARVIS_RUNTIMES", str(Path.home() / ".cache" / "jarvis" / "runtimes"))
    )
    script = (
        runtimes
        / f"mcp-servers-{MCP_SERVERS_VERSION}"
        / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    )
    if not script.exists():
        return None
    return McpServerSpec(name="every", command="node", args=(str(script), "stdio"))


async def startup_rows(quick: bool) -> list[Row]:
    runs = 3 if quick else 7
    servers = {"the SDK's MCPServer (python)": _spec()}
    npm = _everything()
    if npm is not None:
        servers["npm server-everything (node)"] = npm
    else:
        sys.stderr.write("bench_mcp: server-everything is not installed: its row is left out\n")
    rows: list[Row] = []
    for label, spec in servers.items():
        seconds = statistics.median([await _start_once(spec) for _ in range(runs)])
        rows.append(
            Row(
                name=f"MCP server start to tool list: {label}",
                value=seconds,
                unit="s",
                note=f"median of {runs}, stop included in no figure",
            )
        )
    return rows


def _token_counter() -> tuple[str, object]:
    try:
        from llama_cpp import Llama

        from jarvis.adapters.inference.llamacpp import default_model_path

        model = Llama(model_path=default_model_path(), vocab_only=True, verbose=False)
    except Exception:
        return "characters / 4", None
    return "SmolLM2 tokenizer", model


def _count(counter: object, text: str) -> int:
    if counter is None:
        return len(text) // 4
    tokenize = getattr(counter, "tokenize")  # noqa: B009 - llama_cpp's untyped API
    return len(tokenize(text.encode("utf-8"), add_bos=False))


async def description_rows() -> list[Row]:
    long = (
        "Read the complete contents of a file from the file system as text. Handles various "
        "text encodings and provides detailed error messages if the file cannot be read. "
        "Use this tool when you need to examine the contents of a single file. Only works "
        "within allowed directories."
    )
    echo: McpHandler = REFERENCE_TOOLS["echo"][1]
    tools: dict[str, tuple[McpToolInfo, McpHandler]] = {
        f"tool_{i}": (McpToolInfo(name=f"tool_{i}", description=f"{i}: {long}"), echo)
        for i in range(100)
    }
    source = McpToolSource(
        [McpServerEntry(spec=McpServerSpec(name="big", command="x"))],
        lambda spec: InMemoryMcpClient(spec.name, tools),
    )
    await source.prepare(["big"])
    built = source.build(["big"])
    how, counter = _token_counter()
    described = "\n".join(tool.spec.description for tool in built)
    tokens = _count(counter, described)
    full = _count(counter, "\n".join(f"{i}: {long}" for i in range(100)))
    return [
        Row(
            name="100 MCP tools' descriptions in the prompt",
            value=tokens,
            unit="tokens",
            baseline=full,
            baseline_name="the server's full descriptions",
            goal="<= 2000 tokens",
            ok=tokens <= 2000,
            note=how,
        )
    ]


async def run(ctx: BenchContext) -> list[Row]:
    rows = await call_rows(ctx.quick)
    rows += await startup_rows(ctx.quick)
    rows += await description_rows()
    return rows


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the MCP benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["OPENJARVIS_HOME"] = home
        ctx = BenchContext(stub_url="", quick=args.quick)
        print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
