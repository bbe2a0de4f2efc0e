"""External runtimes: what the ``opencode``, ``claude_code`` and ``openhands`` bridges cost
over the runtimes.

    python -m bench.bench_runtimes [--quick] [--only opencode|claude_code|openhands]
    python -m bench.run                        # with every other benchmark

On the scripted engine (loopback, instant answers), with the pinned ``opencode serve``:

* the server's start-up (spawn to a healthy ``/global/health``): opencode's own cost,
  paid once per engine configuration;
* one ask on a running server through the adapter (prompt sent, tokens streamed from the
  server's event stream, the answer read) against the same ask sent bare (one blocking
  ``POST /session/{id}/message`` with httpx, in a session of a folder of its own),
  alternating which goes first: the difference is the bridge's overhead;
* a second ask reuses the server (the same process): no start-up again.

For ``claude_code`` (the pinned runner and SDK, on jarvis's loopback Anthropic endpoint
over the scripted engine): one run through the adapter against the same request piped
into ``node runner.mjs`` bare (spawn to exit); the difference is the bridge's overhead.
The endpoint's start-up is reported apart (once per runtime).

For ``openhands`` (the pinned SDK in its Python 3.12 venv): one run through the adapter
against the same request piped into ``python -I runner_script.py`` bare (spawn to exit);
the difference is the bridge's overhead. The SDK's import alone is reported apart.

Skipped (no rows) when opencode, a runner, or the openhands venv is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import BenchContext, Row
from jarvis.adapters.opencode_server import OpenCodeRuntime, opencode_binary
from jarvis.adapters.opencode_server.config import PROVIDER_ID
from jarvis.domain.external_runtime import ExternalRunDone, ExternalRunRequest, ExternalRuntimePort
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine


async def _ask(runtime: ExternalRuntimePort, request: ExternalRunRequest) -> ExternalRunDone:
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
        # the bare asks run in a folder of their own (a session of their own, growing as
        # the adapter's does): the adapter's event stream, kept open, is not told of them,
        # so they pay no subscriber the adapter would not have in use
        bare_folder = Path(folder) / "bare"
        bare_folder.mkdir()
        where = {"directory": str(bare_folder)}
        ours, bare = [], []
        async with httpx.AsyncClient(
            base_url=server.endpoint.url, auth=server.endpoint.auth, timeout=60
        ) as client:
            created = await client.post("/session", params=where, json={"title": "bare"})
            created.raise_for_status()
            bare_session = created.json()["id"]
            body = {
                "parts": [{"type": "text", "text": "capital of France?"}],
                "model": {"providerID": PROVIDER_ID, "modelID": MODEL},
                "agent": "build",
            }

            async def bare_ask() -> float:
                began = time.perf_counter()
                reply = await client.post(
                    f"/session/{bare_session}/message", params=where, json=body
                )
                reply.raise_for_status()
                return time.perf_counter() - began

            sessions: list[str] = []

            async def through_the_adapter() -> float:
                began = time.perf_counter()
                sessions.append((await _ask(runtime, request)).session_id)
                return time.perf_counter() - began

            await bare_ask()  # warm: the folder's opencode instance started
            for index in range(runs):  # alternating which goes first: no order bias
                if index % 2:
                    bare.append(await bare_ask())
                    ours.append(await through_the_adapter())
                else:
                    ours.append(await through_the_adapter())
                    bare.append(await bare_ask())
        reused = runtime.server is not None and runtime.server.pid == pid
        assert set(sessions) == {first.session_id}
        await runtime.aclose()
    ms = 1000.0
    ask, raw = statistics.median(ours) * ms, statistics.median(bare) * ms
    paired = statistics.median(a - b for a, b in zip(ours, bare, strict=True)) * ms
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
            note=f"paired difference p50 {paired:.0f} ms",
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


def _claude_runner() -> Path | None:
    import json
    import os

    version = json.loads(
        (Path(__file__).resolve().parents[1] / "claude_code_runner/package.json").read_text()
    )["version"]
    cache = Path(os.environ.get("JARVIS_RUNTIMES") or Path.home() / ".cache/jarvis/runtimes")
    explicit = os.environ.get("JARVIS_CLAUDE_CODE_RUNNER_DIR")
    folder = Path(explicit) if explicit else cache / f"claude-code-runner-{version}"
    ready = (folder / "runner.mjs").is_file() and (folder / "node_modules").is_dir()
    return folder if ready else None


async def _claude_rows(runner: Path, runs: int) -> list[Row]:
    import shutil

    from jarvis.adapters.claude_agent_sdk import ClaudeCodeRuntime
    from jarvis.adapters.claude_agent_sdk.wire import RunnerRequest
    from jarvis.adapters.inference.openai_compat import OpenAICompatibleEngine
    from jarvis.entrypoints.composition.loopback import loopback_endpoint

    node = shutil.which("node")
    assert node is not None
    with (
        ScriptedEngine([Reply("The capital of France is Paris.")]) as scripted,
        tempfile.TemporaryDirectory(prefix="jarvis-bench-claude-") as folder,
    ):
        engine = OpenAICompatibleEngine(scripted.url, max_retries=0)
        endpoint = loopback_endpoint()
        runtime = ClaudeCodeRuntime(
            install_root=Path(folder) / "install",
            state_dir=Path(folder) / "state",
            endpoint=endpoint,
            runner_dir=runner,
        )
        request = ExternalRunRequest(
            prompt="capital of France?",
            workspace=folder,
            model=MODEL,
            base_url="",
            engine=engine,
            allowed_tools=("Read",),
            new_session=True,
            timeout=120,
        )
        began = time.perf_counter()
        url, key = await endpoint.start(engine, MODEL)
        endpoint_start = time.perf_counter() - began
        await _ask(runtime, request)  # warm: node's and the binary's pages in the cache
        bare_request = (
            RunnerRequest(
                prompt="capital of France?",
                api_key=key,
                base_url=url,
                workspace=folder,
                allowed_tools=["Read"],
                system_prompt="",
                session_id="",
                model=MODEL,
                max_turns=30,
                permission_mode="acceptEdits",
                config_dir=str(Path(folder) / "state"),
                mcp_servers={},
            )
            .model_dump_json()
            .encode()
        )
        ours, bare = [], []
        for _ in range(runs):
            began = time.perf_counter()
            await _ask(runtime, request)
            ours.append(time.perf_counter() - began)
            began = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                node,
                str(runner / "runner.mjs"),
                cwd=folder,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await proc.communicate(bare_request)
            bare.append(time.perf_counter() - began)
            assert proc.returncode == 0, out[-500:]
        await runtime.aclose()
        await engine.aclose()
    ms = 1000.0
    run_ms, bare_ms = statistics.median(ours) * ms, statistics.median(bare) * ms
    return [
        Row(
            name="claude_code: loopback Anthropic endpoint start-up",
            value=endpoint_start * ms,
            unit="ms",
            note="once per runtime (the first run)",
        ),
        Row(
            name="claude_code: one run through the adapter",
            value=run_ms,
            unit="ms",
            baseline=bare_ms,
            baseline_name="the same request piped into node runner.mjs",
            goal="overhead <= 50 ms p50",
            ok=run_ms - bare_ms <= 50.0,
        ),
    ]


async def _openhands_rows(python: str, runs: int) -> list[Row]:
    import json

    from jarvis.adapters.openhands_sdk import OpenHandsRuntime
    from jarvis.adapters.openhands_sdk.process import RUNNER, runner_environment

    with (
        ScriptedEngine([Reply("The capital of France is Paris.")]) as engine,
        tempfile.TemporaryDirectory(prefix="jarvis-bench-openhands-") as folder,
    ):
        data = Path(folder) / "data"
        runtime = OpenHandsRuntime(data_dir=data, python=python)
        request = ExternalRunRequest(
            prompt="capital of France?",
            workspace=folder,
            model=MODEL,
            base_url=engine.url,
            new_session=True,
            timeout=120,
        )
        env = runner_environment(folder, data)
        began = time.perf_counter()
        imported = await asyncio.create_subprocess_exec(
            python,
            "-I",
            "-c",
            "import openhands.sdk, openhands.tools.terminal, openhands.tools.file_editor",
            env=env,
        )
        assert await imported.wait() == 0
        import_s = time.perf_counter() - began
        await _ask(runtime, request)  # warm: the interpreter probed, the pages cached

        async def through_the_adapter() -> float:
            began = time.perf_counter()
            await _ask(runtime, request)
            return time.perf_counter() - began

        async def bare_runner() -> float:
            payload = json.dumps(
                {
                    "prompt": "capital of France?",
                    "workspace": folder,
                    "model": MODEL,
                    "base_url": engine.url,
                    "conversation_id": os.urandom(16).hex(),
                    "persistence_dir": str(data),
                    "mode": "build",
                    "timeout": 120,
                }
            ).encode()
            began = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                python,
                "-I",
                str(RUNNER),
                cwd=folder,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await proc.communicate(payload)
            assert proc.returncode == 0, out[-500:]
            return time.perf_counter() - began

        ours, bare = [], []
        for index in range(runs):  # alternating which goes first: no order bias
            if index % 2:
                bare.append(await bare_runner())
                ours.append(await through_the_adapter())
            else:
                ours.append(await through_the_adapter())
                bare.append(await bare_runner())
        await runtime.aclose()
    ms = 1000.0
    run_ms, bare_ms = statistics.median(ours) * ms, statistics.median(bare) * ms
    paired = statistics.median(a - b for a, b in zip(ours, bare, strict=True)) * ms
    return [
        Row(
            name="openhands: the SDK's import (python -I -c 'import openhands...')",
            value=import_s,
            unit="s",
            note="the SDK's own cost, paid by every run",
        ),
        Row(
            name="openhands: one run through the adapter",
            value=run_ms,
            unit="ms",
            baseline=bare_ms,
            baseline_name="the same request piped into python runner_script.py",
            note=f"paired difference p50 {paired:.0f} ms",
            goal="overhead <= 100 ms p50",
            ok=paired <= 100.0,
        ),
    ]


RUNTIMES = ("opencode", "claude_code", "openhands")


async def run(ctx: BenchContext, only: tuple[str, ...] = RUNTIMES) -> list[Row]:
    """The rows of the runtimes named in ``only`` (all by default) that are installed."""
    rows: list[Row] = []
    binary = opencode_binary()
    if "opencode" in only and binary is not None:
        rows += await _rows(binary, 5 if ctx.quick else 15)
    runner = _claude_runner()
    if "claude_code" in only and runner is not None:
        rows += await _claude_rows(runner, 4 if ctx.quick else 10)
    from jarvis.adapters.openhands_sdk.interpreter import pinned_python

    python = pinned_python(dict(os.environ))
    if "openhands" in only and os.access(python, os.X_OK):
        rows += await _openhands_rows(str(python), 2 if ctx.quick else 5)
    return rows


def main() -> None:
    from bench.run import table

    parser = argparse.ArgumentParser(description="the external-runtime benchmarks alone")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", choices=RUNTIMES, action="append", help="this runtime alone (repeatable)"
    )
    args = parser.parse_args()
    only = tuple(args.only) if args.only else RUNTIMES
    print(table(asyncio.run(run(BenchContext(stub_url="", quick=args.quick), only))))


if __name__ == "__main__":
    main()
