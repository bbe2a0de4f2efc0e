"""The sandboxed agent on Podman: start to first inference, brokered inference, 16 at once.

    python -m bench.bench_sandboxed [--quick]   # just these rows
    python -m bench.run                         # with every other benchmark

A private Podman service is started for the run (``tests/support/podman_service.py``) and
the sandbox image is built in it first (not measured). The host's engine is a scripted stub
answering at once, so what is measured is the sandbox and its protocol:

* container start to the inner agent's first inference request: from the moment the
  sandboxed agent asks for its container until the host's engine receives the request the
  inner agent (``simple``, built inside by the worker) sent over stdio;
* brokered inference overhead: per call, a ``generate`` asked from inside a container
  through the protocol, minus the same call made directly to the same stub on the host;
* 16 sandboxed runs at once (``max_concurrent`` 16): wall time and errors.

Without podman the rows are left out (said on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import textwrap
import time
from collections.abc import AsyncIterator

from bench.common import BenchContext, Row
from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.application.sandbox_runner import IMAGE_PYTHON, ContainerRunner
from jarvis.domain.agents.sandboxed import SandboxedAgent
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.sandbox.host import HostBroker
from jarvis.domain.sandbox.protocol import ResultMessage, RunMessage
from jarvis.testing import ScriptedInference
from tests.support.podman_service import missing_podman, running_podman_service

CONCURRENT = 16
CALLS = 200
BROKERED = textwrap.dedent(
    """
    import asyncio, sys, time
    from jarvis.domain.llm.inference import InferenceRequest
    from jarvis.domain.llm.messages import Message
    from jarvis.domain.sandbox.client import BrokeredInference, HostLink
    from jarvis.domain.sandbox.protocol import ResultMessage, encode
    from jarvis.entrypoints.sandbox_worker import FdSink, stdin_lines

    async def main():
        read = stdin_lines(asyncio.get_running_loop())
        link = HostLink(FdSink(1))
        await read()
        async def pump():
            while (line := await read()) is not None:
                link.dispatch(line)
        pumping = asyncio.create_task(pump())
        engine = BrokeredInference(link, engine_id="stub", model="m")
        request = InferenceRequest(messages=(Message.user("hello"),), model="m")
        for _ in range(20):
            await engine.generate(request)
        started = time.perf_counter()
        for _ in range(CALLS):
            await engine.generate(request)
        each = (time.perf_counter() - started) / CALLS
        await link.send_line(encode(ResultMessage(content=repr(each))))
        pumping.cancel()

    asyncio.run(main())
    """
).replace("CALLS", str(CALLS))


class FirstRequest(ScriptedInference):
    """The stub engine, noting when the first request of a run arrived."""

    first_at: float | None = None

    def _note(self) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()

    async def generate(self, request: InferenceRequest) -> Completion:
        self._note()
        return await super().generate(request)

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        self._note()
        return super().stream(request)


async def _to_first_request(runner: ContainerRunner) -> float:
    engine = FirstRequest(["ok"])
    agent = SandboxedAgent(SimpleAgent(engine, "m"), runner)
    started = time.perf_counter()
    result = await agent.arun("hello")
    if result.content != "ok" or engine.first_at is None:
        raise RuntimeError(f"unexpected run: {result}")
    return (engine.first_at - started) * 1000


async def _brokered_per_call(runner: ContainerRunner) -> float:
    engine = ScriptedInference(["ok"])
    probe = ContainerRunner(runner.containers, command=(IMAGE_PYTHON, "-I", "-c", BROKERED))
    launch = await probe.launch((), run_id="bench")
    broker = HostBroker(
        launch.process, generate=engine.generate, stream=engine.stream, engine_id="stub"
    )
    each = None
    async for item in broker.run(
        RunMessage(question="q", agent="simple", model="m", temperature=0)
    ):
        if isinstance(item, ResultMessage):
            each = float(item.content)
    if each is None:
        raise RuntimeError("the probe did not report")
    return each * 1000


async def _direct_per_call() -> float:
    engine = ScriptedInference(["ok"])
    request = InferenceRequest(messages=(Message.user("hello"),), model="m")
    for _ in range(20):
        await engine.generate(request)
    started = time.perf_counter()
    for _ in range(CALLS):
        await engine.generate(request)
    return (time.perf_counter() - started) / CALLS * 1000


async def _measure(url: str, quick: bool) -> list[Row]:
    runs = 5 if quick else 15
    runtime = DockerContainerRuntime(
        ContainerSettings(runtime="podman", socket=url, max_concurrent=CONCURRENT)
    )
    runner = ContainerRunner(runtime)
    await runtime.ensure_image()
    await _to_first_request(runner)  # warm-up: image layers in the page cache
    first = statistics.median([await _to_first_request(runner) for _ in range(runs)])
    rows = [
        Row(
            name="sandboxed: container start to the inner agent's first inference request",
            value=first,
            unit="ms",
            goal="<= 400 ms p50",
            ok=first <= 400,
        )
    ]
    brokered = statistics.median([await _brokered_per_call(runner) for _ in range(3)])
    direct = statistics.median([await _direct_per_call() for _ in range(3)])
    overhead = brokered - direct
    rows.append(
        Row(
            name="sandboxed: brokered inference overhead per call (over a direct call)",
            value=overhead,
            unit="ms",
            baseline=direct,
            baseline_name="the direct call to the same stub",
            goal="<= 2 ms",
            ok=overhead <= 2,
        )
    )
    started = time.perf_counter()
    results = await asyncio.gather(
        *(_to_first_request(runner) for _ in range(CONCURRENT)), return_exceptions=True
    )
    wall = time.perf_counter() - started
    errors = [r for r in results if isinstance(r, BaseException)]
    rows.append(
        Row(
            name=f"{CONCURRENT} concurrent sandboxed runs ({len(errors)} errors)",
            value=wall,
            unit="s",
            goal="0 errors",
            ok=not errors,
            note=f"first error: {errors[0]!r}"[:200] if errors else "",
        )
    )
    await runtime.cleanup_orphans()
    runtime.close()
    return rows


async def run(ctx: BenchContext) -> list[Row]:
    reason = missing_podman()
    if reason is not None:
        print(f"bench_sandboxed: not measured: {reason}", file=sys.stderr)
        return []
    with running_podman_service() as service:
        return await _measure(service.url, ctx.quick)


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the sandboxed agent benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ctx = BenchContext(stub_url="", quick=args.quick)
    print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
