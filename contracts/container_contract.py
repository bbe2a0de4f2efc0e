"""The behaviour every ContainerPort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import pytest

from jarvis.domain.ports import ContainerPort, ContainerSpec

RuntimeT = TypeVar("RuntimeT", bound=ContainerPort)


class ContainerContract(Generic[RuntimeT]):
    """Subclass with a ``runtime`` fixture and an ``echo_spec`` fixture: a spec whose
    container echoes each stdin line back on stdout (e.g. an image running ``cat``)."""

    @pytest.fixture
    def runtime(self) -> RuntimeT:
        raise NotImplementedError("subclass must provide the `runtime` fixture")

    @pytest.fixture
    def echo_spec(self) -> ContainerSpec:
        raise NotImplementedError("subclass must provide the `echo_spec` fixture")

    async def test_the_runtime_is_available(self, runtime: RuntimeT) -> None:
        assert await runtime.available()
        assert runtime.runtime

    async def test_lines_travel_over_stdio(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        try:
            await process.send('{"hello": "container"}')
            line = await asyncio.wait_for(process.receive(), 30)
            assert line == '{"hello": "container"}'
        finally:
            await process.kill()

    async def test_kill_is_idempotent_and_ends_the_stream(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        await process.kill()
        await process.kill()
        assert await asyncio.wait_for(process.receive(), 30) is None

    async def test_orphans_are_cleaned_up(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        await runtime.start(echo_spec)
        assert await runtime.cleanup_orphans() >= 1
        assert await runtime.cleanup_orphans() == 0

    def test_the_network_is_off_unless_asked_for(self, echo_spec: ContainerSpec) -> None:
        assert ContainerSpec(image=echo_spec.image).network is False
