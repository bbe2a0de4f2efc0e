"""The shipped container-runtime fake passes the container contract."""

from __future__ import annotations

import pytest

from contracts.container_contract import ContainerContract
from jarvis.domain.errors import SandboxError
from jarvis.domain.ports import ContainerSpec
from jarvis.testing.containers import InMemoryContainerRuntime


class TestInMemoryContainerRuntime(ContainerContract[InMemoryContainerRuntime]):
    @pytest.fixture
    def runtime(self) -> InMemoryContainerRuntime:
        return InMemoryContainerRuntime()

    @pytest.fixture
    def echo_spec(self) -> ContainerSpec:
        return ContainerSpec(image="echo", command=("cat",))


async def test_a_missing_runtime_refuses_to_start() -> None:
    runtime = InMemoryContainerRuntime(available=False)
    assert not await runtime.available()
    with pytest.raises(SandboxError):
        await runtime.start(ContainerSpec(image="x"))


async def test_started_specs_are_recorded() -> None:
    runtime = InMemoryContainerRuntime()
    await runtime.start(ContainerSpec(image="img", network=False))
    assert [s.image for s in runtime.started] == ["img"]
