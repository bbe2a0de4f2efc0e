"""What every benchmark shares: the context it runs in and the rows it reports.

A benchmark module is any ``bench/bench_*.py`` exposing ``run(ctx: BenchContext) ->
list[Row]`` (a plain or an ``async`` function); :mod:`bench.run` discovers and runs it after
the built-in measurements, against the same stub server, and prints its rows in the same
table. Each row carries its same-run baseline so that ratios are never compared across runs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One measured figure, with its baseline and goal when it has them."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    goal: str = ""
    ok: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchContext:
    """Where the benchmarks run: the stub server and the Python that runs jarvis."""

    stub_url: str
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    quick: bool = False

    def jarvis_command(self, *args: str) -> list[str]:
        """The ``jarvis`` console script of this Python (``python -m jarvis`` if absent)."""
        script = Path(self.python).parent / "jarvis"
        if script.exists():
            return [str(script), *args]
        return [self.python, "-m", "jarvis", *args]


@dataclass(frozen=True, slots=True)
class ProcessRun:
    seconds: float
    max_rss_kb: int
    returncode: int
    cpu_seconds: float


# Linux counts a child's pre-exec image (a copy of its parent) in its peak RSS, so a child
# of this (large) process would report this process's size. A small launcher process starts
# the command instead, and times it.
_LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
elapsed = time.perf_counter() - started
cpu = usage.ru_utime + usage.ru_stime
print(elapsed, usage.ru_maxrss, os.waitstatus_to_exitcode(status), cpu)
"""


def bytecode_env(env: Mapping[str, str], cache_dir: str | Path) -> dict[str, str]:
    """``env`` for processes that run from bytecode, as an installed package does.

    pip compiles an installed package to bytecode, but a source checkout (an editable
    install) is compiled on first import and kept only if Python may write it: with
    ``PYTHONDONTWRITEBYTECODE`` set, every process would compile jarvis from source again
    (some 30 ms) while the libraries it is compared with load their bytecode. Measured
    processes therefore keep their bytecode in ``cache_dir`` (``PYTHONPYCACHEPREFIX``),
    written by the unmeasured warm-up runs, outside the source tree.
    """
    clean = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    clean["PYTHONPYCACHEPREFIX"] = str(cache_dir)
    return clean


def run_process(command: Sequence[str], *, env: dict[str, str] | None = None) -> ProcessRun:
    """Run a command to the end; its wall time and its own peak RSS (in KiB)."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    return ProcessRun(float(out[0]), int(out[1]), int(out[2]), float(out[3]))


@dataclass(frozen=True, slots=True)
class Timing:
    median: float
    best: float
    max_rss_kb: int
    cpu_median: float
    """User + system CPU seconds of the process: what contention for the CPU cannot inflate."""


def time_process(
    command: Sequence[str], *, runs: int, env: dict[str, str] | None = None, warmup: int = 1
) -> Timing:
    """Median and best wall time of ``runs`` runs (after ``warmup`` unmeasured ones)."""
    for _ in range(warmup):
        run_process(command, env=env)
    results = [run_process(command, env=env) for _ in range(runs)]
    failed = [r for r in results if r.returncode != 0]
    if failed:
        raise RuntimeError(_failure(command, env, failed[0].returncode))
    seconds = [r.seconds for r in results]
    return Timing(
        statistics.median(seconds),
        min(seconds),
        max(r.max_rss_kb for r in results),
        statistics.median(r.cpu_seconds for r in results),
    )


def time_processes(
    commands: Mapping[str, tuple[Sequence[str], dict[str, str] | None]],
    *,
    runs: int,
    warmup: int = 1,
) -> dict[str, Timing]:
    """:func:`time_process` for several commands, run in turn (one of each per round), so
    that a burst of load from elsewhere hits every command alike."""
    for _ in range(warmup):
        for command, env in commands.values():
            run_process(command, env=env)
    results: dict[str, list[ProcessRun]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, env) in commands.items():
            result = run_process(command, env=env)
            if result.returncode != 0:
                raise RuntimeError(_failure(command, env, result.returncode))
            results[name].append(result)
    return {
        name: Timing(
            statistics.median(r.seconds for r in runs_),
            min(r.seconds for r in runs_),
            max(r.max_rss_kb for r in runs_),
            statistics.median(r.cpu_seconds for r in runs_),
        )
        for name, runs_ in results.items()
    }


def _failure(command: Sequence[str], env: dict[str, str] | None, code: int) -> str:
    """What a failed measured command said, from one more run with its output kept."""
    again = subprocess.run(list(command), capture_output=True, text=True, env=env, check=False)
    said = (again.stderr or again.stdout).strip()[-2000:]
    return f"{' '.join(command)} exited with {code}; once more: {again.returncode}\n{said}"


@contextmanager
def stub_process(*options: str) -> Iterator[str]:
    """The stub server (``bench/stub_server.py OPTIONS``) in a child process, so that it
    does not share the client's GIL; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "stub_server.py"), *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"stub server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(10)
