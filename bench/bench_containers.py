"""The container sandbox on Podman: start to first line, a whole cycle, 16 at once.

    python -m bench.bench_containers [--quick]   # just these rows
    python -m bench.run                          # with every other benchmark

A private Podman service is started for the run (``tests/support/podman_service.py``) and
the sandbox image is built in it first (not measured). Measured through
``DockerContainerRuntime``, with every isolation option on:

* create + attach + start until the container's first stdout line arrives: a bare
  ``print``, and after importing what an inner agent imports (jarvis's domain, pydantic)
  before its first inference request; against the same Python started as a plain host
  process;
* a full cycle: start, one line each way, end of stdin, exit code, removal;
* 16 runs at once (``max_concurrent`` 16), each a full cycle: wall time and errors.

Without podman the rows are left out (said on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial

from bench.common import BenchContext, Row
from jarvis.adapters.docker_containers import ContainerSettings, DockerContainerRuntime
from jarvis.adapters.docker_containers.build import PYTHON_LINK, SandboxImage
from jarvis.domain.ports import ContainerSpec
from tests.support.podman_service import missing_podman, running_podman_service

FIRST_LINE = "print('ready', flush=True)"
AGENT_IMPORTS = (
    "import jarvis.domain.ports, jarvis.domain.llm.messages, pydantic\nprint('ready', flush=True)"
)
ECHO = (
    "import sys\nprint('ready', flush=True)\n"
    "for line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"
)
CONCURRENT = 16


def _spec(image: str, code: str) -> ContainerSpec:
    return ContainerSpec(image=image, command=(PYTHON_LINK, "-I", "-c", code), run_id="bench")


async def _first_line(runtime: DockerContainerRuntime, image: str, code: str) -> float:
    started = time.perf_counter()
    process = await runtime.start(_spec(image, code))
    line = await process.receive()
    elapsed = time.perf_counter() - started
    if line != "ready":
        raise RuntimeError(f"the container said {line!r}")
    await process.wait(60)
    return elapsed


async def _cycle(runtime: DockerContainerRuntime, image: str) -> float:
    started = time.perf_counter()
    process = await runtime.start(_spec(image, ECHO))
    if await process.receive() != "ready":
        raise RuntimeError("the echo container did not start")
    await process.send('{"request": 1}')
    if await process.receive() != '{"request": 1}':
        raise RuntimeError("the echo container did not answer")
    await process.close_stdin()
    ended = await process.wait(60)
    if ended.code != 0:
        raise RuntimeError(f"the echo container ended with {ended}")
    return time.perf_counter() - started


def _host_first_line(code: str) -> float:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, check=True)
    elapsed = time.perf_counter() - started
    if out.stdout.strip() != b"ready":
        raise RuntimeError("the host process did not print")
    return elapsed


async def _median(action: Callable[[], Awaitable[float]], runs: int) -> float:
    times = [await action() for _ in range(runs)]
    return statistics.median(times) * 1000


async def _measure(url: str, quick: bool) -> list[Row]:
    runs = 5 if quick else 20
    image_source = SandboxImage()
    runtime = DockerContainerRuntime(
        ContainerSettings(runtime="podman", socket=url, max_concurrent=CONCURRENT),
        image=image_source,
    )
    image = await runtime.ensure_image()
    await _first_line(runtime, image, FIRST_LINE)  # warm-up: image layers in the page cache
    rows = []
    for name, code in (("a bare print", FIRST_LINE), ("jarvis + pydantic imported", AGENT_IMPORTS)):
        ours = await _median(partial(_first_line, runtime, image, code), runs)
        host = statistics.median(_host_first_line(code) for _ in range(runs)) * 1000
        rows.append(
            Row(
                name=f"sandbox start to first line ({name})",
                value=ours,
                unit="ms",
                baseline=host,
                baseline_name="the same Python as a host process",
                goal="<= 400 ms p50",
                ok=ours <= 400,
            )
        )
    cycle = await _median(partial(_cycle, runtime, image), runs)
    rows.append(
        Row(
            name="sandbox full cycle (start, one line each way, exit, remove)",
            value=cycle,
            unit="ms",
        )
    )
    started = time.perf_counter()
    results = await asyncio.gather(
        *(_cycle(runtime, image) for _ in range(CONCURRENT)), return_exceptions=True
    )
    wall = time.perf_counter() - started
    errors = [r for r in results if isinstance(r, BaseException)]
    rows.append(
        Row(
            name=f"{CONCURRENT} concurrent sandbox runs ({len(errors)} errors)",
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
        print(f"bench_containers: not measured: {reason}", file=sys.stderr)
        return []
    with running_podman_service() as service:
        return await _measure(service.url, ctx.quick)


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the container sandbox benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ctx = BenchContext(stub_url="", quick=args.quick)
    print(table(asyncio.run(run(ctx))))


if __name__ == "__main__":
    main()
