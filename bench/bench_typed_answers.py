"""A typed answer (``output_type``) against the same plain question, on the loopback stub.

    python -m bench.bench_typed_answers [--quick]   # just this row
    python -m bench.run                             # with every other benchmark

Both go through ``Jarvis.aask`` with the ``simple`` agent to the same stub, one request
each; the typed run adds the schema to the request and the prompt, then decodes the reply
and validates it with the model's pydantic ``TypeAdapter``. Blocks of each are interleaved
(a burst of load from elsewhere hits both alike) and the row reports the client's CPU time
per run (the stub is another process; on a loaded machine wall time measures the other
processes more than jarvis) and the median difference: the goal is at most 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from bench.common import BenchContext, Row, stub_process

QUESTION = "What is the capital of France?"


class Place(BaseModel):
    city: str
    country: str


async def _per_run(call: Callable[[], Awaitable[object]], n: int) -> tuple[float, float]:
    """Mean wall seconds and mean client CPU seconds per run over ``n`` runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await call()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


async def run(ctx: BenchContext) -> list[Row]:
    from jarvis import Jarvis

    n, blocks = (30, 3) if ctx.quick else (200, 9)
    async with Jarvis(engine="openai", base_url=ctx.stub_url, model="stub-model") as j:

        async def plain() -> object:
            return await j.aask(QUESTION)

        async def typed() -> object:
            place = await j.aask(QUESTION, output_type=Place)
            assert place == Place(city="Paris", country="France"), place
            return place

        await _per_run(plain, 20)
        await _per_run(typed, 20)
        plain_cpu, typed_cpu, cpu_extra, wall_extra = [], [], [], []
        for _ in range(blocks):
            first_wall, first_cpu = await _per_run(plain, n)
            second_wall, second_cpu = await _per_run(typed, n)
            plain_cpu.append(first_cpu)
            typed_cpu.append(second_cpu)
            cpu_extra.append(second_cpu - first_cpu)
            wall_extra.append(second_wall - first_wall)
    extra_ms = statistics.median(cpu_extra) * 1000
    wall_ms = statistics.median(wall_extra) * 1000
    return [
        Row(
            name="typed answer (output_type=pydantic model, validated), Jarvis.aask on the "
            "stub: client CPU per run, vs the same plain question",
            value=statistics.median(typed_cpu) * 1000,
            unit="ms",
            baseline=statistics.median(plain_cpu) * 1000,
            baseline_name="the plain question (same run)",
            goal="<= +1 ms per run",
            ok=extra_ms <= 1.0,
            note=f"+{extra_ms:.3f} ms of CPU per run (wall +{wall_ms:.3f} ms); median of "
            f"{blocks} interleaved blocks of {n}",
        )
    ]


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="typed answers against plain ones")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(), stub_process() as url:
        print(table(asyncio.run(run(BenchContext(stub_url=url, quick=args.quick)))))


if __name__ == "__main__":
    main()
