"""External runtimes: what the ``opencode`` bridge costs over opencode itself.

    python -m bench.bench_runtimes [--quick]   # just these rows
    python -m bench.run                        # with every other benchmark

On the scripted engine (loopback, instant answers), with the pinned ``opencode serve``:

* the server's start-up (spawn to a healthy ``/global/health``): opencode's own cost,
  paid once per engine configuration;
* one ask on a running server through the adapter (event stream opened, prompt sent,
  tokens streamed, messages read back) against the same ask sent bare (one blocking
  ``POST /session/{id}/message`` with httpx): the difference is the bridge's overhead;
* a second ask reuses the server (the same process): no start-up again.

Skipped (no rows) when opencode is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import BenchContext, Row
from jarvis.adapters.opencode_server import OpenCodeRuntime, opencode_binary
from jarvis.adapters.opencode_server.config import PROVIDER_ID
from jarvis.domain.external_runtime import ExternalRunDone, ExternalRunRequest
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine


async def _ask(runtime: OpenCodeRuntime, request: ExternalRunRequest) -> ExternalRunDone:
    last = None
    async for event in runtime.run(request):
        last = event
    assert isinstance(last, ExternalRunDone)
    return last


async def _rows(binary: str, runs: int) -> list[Row]:
    with (
        ScriptedEngine([Reply("The capital of France is Paris.")]) as engine,
        tempfile.TemporaryDirectory(prefix="jarvis-bench-opencode-") as folder,
    ):
        request = ExternalRunRequest(
            prompt="capital of France?",
            workspace=folder,
            model=MODEL,
            base_url=engine.url,
            timeout=120,
        )
        starts, firsts = [], []
        for _ in range(2 if runs < 10 else 3):
            runtime = OpenCodeRuntime(data_dir=Path(folder) / "data", binary=binary)
            began = time.perf_counter()
            await runtime._ensure_server(request)
            starts.append(time.perf_counter() - began)
            began = time.perf_counter()
            await _ask(runtime, request)
            firsts.append(time.perf_counter() - began)
            await runtime.aclose()
        runtime = OpenCodeRuntime(data_dir=Path(folder) / "data", binary=binary)
        first = await _ask(runtime, request)
        server = runtime.server
        assert server is not None
        pid = server.pid
        ours, bare = [], []
        async with httpx.AsyncClient(
            base_url=server.endpoint.url, auth=server.endpoint.auth, timeout=60
        ) as client:
            body = {
                "parts": [{"type": "text", "text": "capital of France?"}],
                "model": {"providerID": PROVIDER_ID, "modelID": MODEL},
                "agent": "build",
            }
            for _ in range(runs):
                began = time.perf_counter()
                again = await _ask(runtime, request)
                ours.append(time.perf_counter() - began)
                began = time.perf_counter()
                reply = await client.post(f"/session/{first.session_id}/message", json=body)
                reply.raise_for_status()
                bare.append(time.perf_counter() - began)
        reused = runtime.server is not None and runtime.server.pid == pid
        assert again.session_id == first.session_id
        await runtime.aclose()
    ms = 1000.0
    ask, raw = statistics.median(ours) * ms, statistics.median(bare) * ms
    return [
        Row(
            name="opencode serve start-up (spawn to healthy)",
            value=statistics.median(starts),
            unit="s",
            note="opencode's own cost, once per engine configuration",
        ),
        Row(name="opencode: first ask on a new server", value=statistics.median(firsts), unit="s"),
        Row(
            name="opencode: ask on a running server (adapter, streamed)",
            value=ask,
            unit="ms",
            baseline=raw,
            baseline_name="bare POST /session/{id}/message",
            goal="overhead <= 50 ms p50",
            ok=ask - raw <= 50.0,
        ),
        Row(
            name="opencode: second ask reuses the server",
            value=1.0 if reused else 0.0,
            unit="yes",
            goal="same process",
            ok=reused,
        ),
    ]


async def run(ctx: BenchContext) -> list[Row]:
    binary = opencode_binary()
    if binary is None:
        return []
    return await _rows(binary, 5 if ctx.quick else 15)


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the external-runtime benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(table(asyncio.run(run(BenchContext(stub_url="", quick=args.quick)))))


if __name__ == "__main__":
    main()
