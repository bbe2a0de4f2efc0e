"""The MCP SDK adapter against a real server (the ``mcp`` SDK's MCPServer in
``tests/support/mcp_reference_server.py``), over stdio and streamable HTTP: the contract,
then every fault a server can have, each followed by a look at the process table."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from contracts.mcp_client_contract import McpClientContract
from jarvis.adapters.mcp_sdk import McpSdkClient
from jarvis.adapters.mcp_sdk.client import STDERR_TAIL_BYTES
from jarvis.domain.mcp import McpError, McpServerDownError, McpServerSpec, McpTimeoutError
from tests.support.processes import processes_with

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_reference_server.py")
RAW_SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_raw_server.py")


def stdio_spec(
    tag: str, *flags: str, startup_timeout: float = 30.0, **extra: object
) -> McpServerSpec:
    return McpServerSpec(
        name="ref",
        command=sys.executable,
        args=(SERVER, "--tag", tag, *flags),
        startup_timeout=startup_timeout,
        **extra,  # type: ignore[arg-type]
    )


async def until_exists(path: Path) -> None:
    """Wait (at most a minute) for the server to write ``path``."""
    for _ in range(6000):
        if path.exists():  # noqa: ASYNC240 - one stat between sleeps
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} was never written")


@pytest.fixture
def tag() -> Iterator[str]:
    word = f"mcp-test-{uuid.uuid4().hex}"
    yield word
    leftovers = processes_with(word)
    assert leftovers == [], f"processes left behind: {leftovers}"


class TestStdioServer(McpClientContract[McpSdkClient]):
    @pytest.fixture
    async def client(self, tag: str) -> AsyncIterator[McpSdkClient]:
        client = McpSdkClient(stdio_spec(tag))
        yield client
        await client.aclose()


@pytest.fixture
def http_server(tmp_path: Path, tag: str) -> Iterator[str]:
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port_file), "--tag", tag],
        stdin=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # until it wrote the port it listens on (or died)
            if port_file.exists() or process.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert port_file.exists(), "the HTTP reference server did not start"
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.kill()
        process.wait()


class TestHttpServer(McpClientContract[McpSdkClient]):
    @pytest.fixture
    async def client(self, http_server: str) -> AsyncIterator[McpSdkClient]:
        client = McpSdkClient(McpServerSpec(name="ref", url=http_server, startup_timeout=30))
        yield client
        await client.aclose()

    async def test_a_crash_mid_call_fails_the_call_and_a_start_brings_it_back(
        self, client: McpSdkClient
    ) -> None:
        """A remote server is not jarvis's to restart: the call fails, within its timeout."""
        await client.start()
        with pytest.raises(McpError):
            await client.call_tool("crash", {}, timeout=10)


async def test_the_environment_is_only_path_home_lang_and_the_configured_variables(
    tag: str,
) -> None:
    environ = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OPENAI_API_KEY": "sk-secret", "USER": "x"}
    client = McpSdkClient(stdio_spec(tag, env={"NOTES_TOKEN": "t"}), environ=environ)
    try:
        await client.start()
        result = await client.call_tool("env_names", {}, timeout=10)
    finally:
        await client.aclose()
    names = set(result.content[0].text.split(","))
    assert {"HOME", "PATH", "NOTES_TOKEN"} <= names
    assert "OPENAI_API_KEY" not in names
    assert "USER" not in names
    assert names <= {"HOME", "PATH", "NOTES_TOKEN", "LANG", "LC_CTYPE"}


async def test_a_server_that_never_answers_fails_at_its_startup_timeout(tag: str) -> None:
    client = McpSdkClient(stdio_spec(tag, "--never-start", startup_timeout=1.0))
    with pytest.raises(McpTimeoutError, match="startup_timeout"):
        await client.start()
    assert not client.running
    assert processes_with(tag) == []


async def test_a_command_that_does_not_exist_fails_to_start_with_why() -> None:
    client = McpSdkClient(McpServerSpec(name="ghost", command="/nonexistent/mcp-server"))
    with pytest.raises(McpServerDownError, match="cannot run"):
        await client.start()


async def test_a_server_that_exits_at_once_shows_its_stderr(tag: str) -> None:
    spec = McpServerSpec(
        name="dies",
        command=sys.executable,
        args=("-c", "import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)", tag),
    )
    client = McpSdkClient(spec)
    with pytest.raises(McpServerDownError) as caught:
        await client.start()
    assert "missing API key" in str(caught.value)


async def test_a_malformed_frame_fails_the_call_at_once_and_kills_the_server(tag: str) -> None:
    spec = McpServerSpec(name="raw", command=sys.executable, args=(RAW_SERVER, tag))
    client = McpSdkClient(spec)
    try:
        await client.start()
        with pytest.raises(McpServerDownError, match="malformed frame"):
            await client.call_tool("garbage", {}, timeout=60)
        assert not client.running
        assert processes_with(tag) == []
    finally:
        await client.aclose()


async def test_a_malformed_frame_at_start_fails_the_start(tag: str) -> None:
    client = McpSdkClient(stdio_spec(tag, "--garbage-first"))
    with pytest.raises(McpServerDownError, match="malformed frame"):
        await client.start()


async def test_a_frame_over_the_line_bound_breaks_the_server(tag: str) -> None:
    client = McpSdkClient(stdio_spec(tag), max_line_bytes=16384)
    try:
        await client.start()
        with pytest.raises(McpServerDownError, match="longer than 16384 bytes"):
            await client.call_tool("echo", {"text": "x" * 40000}, timeout=60)
    finally:
        await client.aclose()


async def test_a_stderr_flood_is_drained_and_only_its_tail_kept(tag: str) -> None:
    client = McpSdkClient(stdio_spec(tag))
    try:
        await client.start()
        result = await client.call_tool("flood", {"megabytes": 32}, timeout=120)
        assert result.content[0].text == "flooded"
        assert 0 < len(client.stderr_tail()) <= STDERR_TAIL_BYTES
        again = await client.call_tool("echo", {"text": "after"}, timeout=30)
        assert again.content[0].text == "after"
    finally:
        await client.aclose()


async def test_close_during_a_hung_call_stops_the_server_and_fails_the_call(
    tag: str, tmp_path: Path
) -> None:
    client = McpSdkClient(stdio_spec(tag))
    await client.start()
    marker = tmp_path / "hung"
    call = asyncio.ensure_future(client.call_tool("hang", {"marker": str(marker)}, timeout=600))
    await until_exists(marker)  # the server is inside the call
    await client.aclose()
    with pytest.raises(McpServerDownError):
        await call
    assert processes_with(tag) == []


async def test_a_server_that_ignores_sigterm_and_leaves_a_child_is_killed_whole(
    tag: str,
) -> None:
    client = McpSdkClient(stdio_spec(tag, "--stubborn"))
    await client.start()
    assert len(processes_with(tag)) == 2  # the server and its child
    await client.aclose()
    assert processes_with(tag) == []


async def test_a_cancelled_caller_leaves_the_connection_usable(tag: str, tmp_path: Path) -> None:
    client = McpSdkClient(stdio_spec(tag))
    try:
        await client.start()
        marker = tmp_path / "hung"
        call = asyncio.ensure_future(client.call_tool("hang", {"marker": str(marker)}, timeout=600))
        await until_exists(marker)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        result = await client.call_tool("echo", {"text": "alive"}, timeout=30)
        assert result.content[0].text == "alive"
    finally:
        await client.aclose()


async def test_a_server_that_dies_during_shutdown_is_stopped_cleanly(tag: str) -> None:
    spec = McpServerSpec(
        name="raw", command=sys.executable, args=(RAW_SERVER, tag, "--die-on-close")
    )
    client = McpSdkClient(spec)
    await client.start()
    await asyncio.wait_for(client.aclose(), 30)
    assert not client.running
    assert processes_with(tag) == []
    tools = await client.start()  # and it can be started again
    assert [tool.name for tool in tools] == ["garbage"]
    await client.aclose()
