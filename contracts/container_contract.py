"""The behaviour every ContainerPort implementation shows (fake and real alike)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import ClassVar, Generic, TypeVar

import pytest

from jarvis.domain.errors import SandboxError
from jarvis.domain.ports import ContainerExitReason, ContainerPort, ContainerProcess, ContainerSpec

RuntimeT = TypeVar("RuntimeT", bound=ContainerPort)
DEADLINE = 60.0


class ContainerContract(Generic[RuntimeT]):
    """Subclass with a ``runtime`` fixture, built with ``max_concurrent`` equal to
    :attr:`MAX_CONCURRENT`, and an ``echo_spec`` fixture: a spec whose container echoes each
    stdin line back on stdout and exits with 0 at the end of its stdin (an image running
    ``cat``)."""

    MAX_CONCURRENT: ClassVar[int] = 2

    @pytest.fixture
    def runtime(self) -> RuntimeT:
        raise NotImplementedError("subclass must provide the `runtime` fixture")

    @pytest.fixture
    def echo_spec(self) -> ContainerSpec:
        raise NotImplementedError("subclass must provide the `echo_spec` fixture")

    async def test_the_runtime_is_available(self, runtime: RuntimeT) -> None:
        assert await runtime.available()
        assert runtime.runtime
        status = await runtime.status()
        assert status.available
        assert status.runtime == runtime.runtime
        assert status.endpoint

    async def test_the_image_is_ensured_once_and_named(self, runtime: RuntimeT) -> None:
        said: list[str] = []
        image = await runtime.ensure_image(said.append)
        assert image
        assert await runtime.ensure_image(said.append) == image
        assert all(isinstance(line, str) and line for line in said)
        assert (await runtime.status()).image_present

    async def test_lines_travel_over_stdio(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        try:
            assert process.id
            await process.send('{"hello": "container"}')
            line = await asyncio.wait_for(process.receive(), DEADLINE)
            assert line == '{"hello": "container"}'
        finally:
            await process.kill()

    async def test_a_line_with_a_newline_inside_is_refused(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        try:
            with pytest.raises(SandboxError):
                await process.send("two\nlines")
        finally:
            await process.kill()

    async def test_end_of_stdin_ends_the_container_with_its_code(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        await process.send("last")
        await process.close_stdin()
        await process.close_stdin()
        assert await asyncio.wait_for(process.receive(), DEADLINE) == "last"
        assert await asyncio.wait_for(process.receive(), DEADLINE) is None
        ended = await asyncio.wait_for(process.wait(), DEADLINE)
        assert (ended.code, ended.reason) == (0, ContainerExitReason.EXITED)
        assert await runtime.cleanup_orphans() == 0

    async def test_kill_is_idempotent_and_ends_the_stream(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        await process.kill()
        await process.kill()
        assert await asyncio.wait_for(process.receive(), DEADLINE) is None
        assert (await process.wait()).reason is ContainerExitReason.KILLED
        with pytest.raises(SandboxError):
            await process.send("too late")

    async def test_a_container_past_its_timeout_is_removed(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(dataclasses.replace(echo_spec, timeout=1.0))
        ended = await asyncio.wait_for(process.wait(), DEADLINE)
        assert ended.reason is ContainerExitReason.TIMED_OUT
        assert await asyncio.wait_for(process.receive(), DEADLINE) is None
        assert await runtime.cleanup_orphans() == 0

    async def test_wait_with_a_timeout_removes_it(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        ended = await asyncio.wait_for(process.wait(timeout=0.5), DEADLINE)
        assert ended.reason is ContainerExitReason.TIMED_OUT
        assert await runtime.cleanup_orphans() == 0

    async def test_orphans_are_cleaned_up(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        await runtime.start(echo_spec)
        assert await runtime.cleanup_orphans() >= 1
        assert await runtime.cleanup_orphans() == 0

    async def test_a_live_process_s_containers_are_never_orphans(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        process = await runtime.start(echo_spec)
        try:
            assert await runtime.orphans(remove=True) == []
            await process.send("still here")
            assert await asyncio.wait_for(process.receive(), DEADLINE) == "still here"
        finally:
            await process.kill()

    async def test_at_most_max_concurrent_containers_exist(
        self, runtime: RuntimeT, echo_spec: ContainerSpec
    ) -> None:
        """Starting one more waits until one of them is removed."""
        running: list[ContainerProcess] = []
        extra: asyncio.Future[ContainerProcess] | None = None
        try:
            for _ in range(self.MAX_CONCURRENT):
                running.append(await asyncio.wait_for(runtime.start(echo_spec), DEADLINE))
            extra = asyncio.ensure_future(runtime.start(echo_spec))
            await asyncio.sleep(1.0)  # ample time to start one, were it allowed
            assert not extra.done()
            await running.pop(0).kill()
            running.append(await asyncio.wait_for(extra, DEADLINE))
            await running[-1].send("after a slot came free")
            assert await asyncio.wait_for(running[-1].receive(), DEADLINE) == (
                "after a slot came free"
            )
        finally:
            if extra is not None and not extra.done():
                extra.cancel()
            for process in running:
                await process.kill()

    def test_the_network_is_off_unless_asked_for(self, echo_spec: ContainerSpec) -> None:
        assert ContainerSpec(image=echo_spec.image).network is False
