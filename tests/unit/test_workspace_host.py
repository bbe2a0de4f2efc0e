"""The local workspace host and its in-memory double pass the same contract."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from contracts.workspace_host_contract import HostWorld, WorkspaceHostContract
from jarvis.application.workspace_host import LocalWorkspaceHost
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
