"""The shipped container-runtime fake passes the container contract."""

from __future__ import annotations

import pytest

from contracts.container_contract import ContainerContract
from jarvis.domain.errors import ContainerImageError, ContainerRuntimeUnavailableError, SandboxError
from jarvis.domain.ports import ContainerSpec
from jarvis.testing.containers import InMemoryContainerRuntime


class TestInMemoryContainerRuntime(ContainerContract[InMemoryContainerRuntime]):
    @pytest.fixture
    def runtime(self) -> InMemoryContainerRuntime:
        return InMemoryContainerRuntime(max_concurrent=self.MAX_CONCURRENT)

    @pytest.fixture
    def echo_spec(self) -> ContainerSpec:
        return ContainerSpec(image="echo", command=("cat",))


async def test_a_missing_runtime_refuses_to_start() -> None:
    runtime = InMemoryContainerRuntime(available=False)
    assert not await runtime.available()
    assert not (await runtime.status()).available
    with pytest.raises(ContainerRuntimeUnavailableError) as caught:
        await runtime.start(ContainerSpec(image="x"))
    assert isinstance(caught.value, SandboxError)
    with pytest.raises(ContainerRuntimeUnavailableError):
        await runtime.ensure_image()


async def test_a_missing_image_is_a_typed_error() -> None:
    runtime = InMemoryContainerRuntime(image_present=False)
    with pytest.raises(ContainerImageError):
        await runtime.start(ContainerSpec(image="x"))
    with pytest.raises(ContainerImageError):
        await runtime.ensure_image()


async def test_started_specs_are_recorded() -> None:
    runtime = InMemoryContainerRuntime()
    await runtime.start(ContainerSpec(image="img", network=False))
    assert [s.image for s in runtime.started] == ["img"]
    assert runtime.peak_running == 1


def test_max_concurrent_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrent"):
        InMemoryContainerRuntime(max_concurrent=0)
