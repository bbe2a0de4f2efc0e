"""The local workspace host and its in-memory double pass the same contract, and the
external agents ask theirs for the workspace and the environment when a run starts."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from contracts.workspace_host_contract import HostWorld, WorkspaceHostContract
from jarvis.application.registry import builtin_agents
from jarvis.application.workspace_host import LocalWorkspaceHost
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.loop.options import AgentParts
from jarvis.testing import InMemoryExternalRuntime, InMemoryExternalRuntimes, ScriptedInference
from jarvis.testing.external_runtimes import InMemoryWorkspaceHost


class TestLocalWorkspaceHost(WorkspaceHostContract):
    @pytest.fixture
    def host(self) -> LocalWorkspaceHost:
        return LocalWorkspaceHost()

    @pytest.fixture
    def world(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HostWorld:
        real = tmp_path / "real"
        real.mkdir()
        link = tmp_path / "link"
        link.symlink_to(real)
        plain = tmp_path / "file.txt"
        plain.write_text("not a directory")
        name = f"JARVIS_TEST_{uuid.uuid4().hex.upper()}"
        monkeypatch.setenv(name, "a value")
        return HostWorld(
            linked_directory=str(link),
            real_directory=str(real.resolve()),
            not_a_directory=str(plain),
            variable=name,
            value="a value",
        )


class TestInMemoryWorkspaceHost(WorkspaceHostContract):
    @pytest.fixture
    def host(self) -> InMemoryWorkspaceHost:
        return InMemoryWorkspaceHost(
            directories={"/work": "/work", "/link": "/real", "/real": "/real"},
            environment={"KEY": "a value"},
        )

    @pytest.fixture
    def world(self) -> HostWorld:
        return HostWorld(
            linked_directory="/link",
            real_directory="/real",
            not_a_directory="/file.txt",
            variable="KEY",
            value="a value",
        )


async def test_the_external_agents_take_workspace_and_key_from_their_host() -> None:
    host = InMemoryWorkspaceHost(
        cwd="/started/here",
        directories={"/started/here": "/real/here", "/elsewhere": "/real/elsewhere"},
        environment={"ANTHROPIC_API_KEY": "sk-ant-from-the-host"},
    )
    opencode = InMemoryExternalRuntime()
    claude = InMemoryExternalRuntime(runtime_id="claude_code")
    parts = AgentParts(
        inference=ScriptedInference(engine_id="openai", base_url="http://127.0.0.1:1/v1"),
        model="m",
        runtimes=InMemoryExternalRuntimes({"opencode": opencode, "claude_code": claude}),
        host=host,
    )
    await builtin_agents().create("opencode", parts).arun("hi")
    assert opencode.requests[0].workspace == "/real/here"  # the host's, resolved
    cloud = builtin_agents().create(
        "claude_code", parts, {"workspace": "/elsewhere", "cloud": True}
    )
    await cloud.arun("hi")
    assert (claude.requests[0].workspace, claude.requests[0].api_key) == (
        "/real/elsewhere",
        "sk-ant-from-the-host",
    )
    missing = builtin_agents().create("opencode", parts, {"workspace": "/nowhere"})
    with pytest.raises(ConfigurationError, match="'/nowhere' is not a directory"):
        await missing.arun("hi")
