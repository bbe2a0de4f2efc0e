"""``jarvis traces list | show ID | export ID`` and ``jarvis stats``: what runs did.

They only read the trace store (``[traces] db_path``); no engine is chosen or contacted.
An unknown ID or a bad ``--since`` is a usage error (exit code 2); a trace store that
cannot be read (damaged, locked) is exit code 7, left untouched.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.options import (
    MAX_COUNT,
    ConfigOption,
    JsonOption,
    VerboseOption,
    open_store_runtime,
)
from jarvis.entrypoints.cli.output import exit_with, write_json, write_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from jarvis.application.config import JarvisConfig
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.ports import TraceStorePort
    from jarvis.domain.traces import Span, Trace

app = command_group("What each run did: its inferences and tool calls, with timings and tokens.")

IdArgument = Annotated[
    str, typer.Argument(help="The trace's id (or its first characters).", show_default=False)
]
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since", help="Only runs started in the last 30s, 15m, 1h, 7d, 2w...", show_default=False
    ),
]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_OFF_HINT = "Set [traces] enabled = true (or [telemetry] enabled = true) in config.toml."


def parse_since(text: str) -> float:
    """``1h`` as seconds; ``ConfigurationError`` for anything else."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit not in _UNITS or not number.isdigit() or len(number) > 9:
        raise ConfigurationError(
            f"--since {text!r} is not a duration.", hint="Use a number and s, m, h, d or w: 1h, 7d."
        )
    return int(number) * _UNITS[unit]


def since_epoch(since: str | None) -> float | None:
    """The epoch time ``--since`` reaches back to (``None``: from the first run)."""
    return None if since is None else time.time() - parse_since(since)


def _recording(settings: JarvisConfig) -> bool:
    """Whether runs are being recorded (``[traces]`` or ``[telemetry]`` enabled)."""
    return settings.traces.enabled or settings.telemetry.enabled


def _open(ctx: typer.Context, config: Path | None) -> tuple[TraceStorePort, JarvisConfig]:
    runtime = open_store_runtime(ctx, config)
    return runtime.trace_store(), runtime.config


def _read(body: Callable[[], None], *, verbose: bool) -> int:
    """``guarded``, with a store that cannot be read reported as exit code 7."""
    from jarvis.entrypoints.cli.trace_reads import read_reported

    return read_reported(body, verbose=verbose)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _tokens(span: Span) -> tuple[int, int]:
    tokens_in = span.attributes.get("tokens_in", 0)
    tokens_out = span.attributes.get("tokens_out", 0)
    return (
        tokens_in if isinstance(tokens_in, int) else 0,
        tokens_out if isinstance(tokens_out, int) else 0,
    )


def _summary(trace: Trace) -> JSONObject:
    tokens = [_tokens(s) for s in trace.spans if s.kind == "inference"]
    return {
        "id": trace.trace_id,
        "agent": trace.agent,
        "started_at": datetime.fromtimestamp(trace.start).astimezone().isoformat(),
        "duration_ms": round(trace.duration * 1000, 3),
        "status": trace.status,
        "error": trace.error,
        "inferences": len(tokens),
        "tool_calls": sum(1 for s in trace.spans if s.kind == "tool"),
        "tokens_in": sum(t[0] for t in tokens),
        "tokens_out": sum(t[1] for t in tokens),
        "continues": (
            {"trace_id": trace.remote_trace_id, "parent_span_id": trace.remote_parent_id}
            if trace.remote_trace_id
            else None
        ),
    }


@app.command("list")
def list_traces(
    ctx: typer.Context,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Only this agent's runs.")
    ] = None,
    since: SinceOption = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Only failed or cancelled runs.")
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_COUNT, help="At most N runs.")
    ] = 50,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """List recorded runs, newest first."""

    def body() -> None:
        from jarvis.entrypoints.cli.trace_reads import newest

        start = since_epoch(since)
        store, settings = _open(ctx, config)
        traces = newest(store, since=start, agent=agent, failed_only=failed, limit=limit)
        if json_output:
            write_json([_summary(t) for t in traces])
            return
        if not traces:
            recording = _recording(settings)
            write_line("No traces." + ("" if recording else " " + _OFF_HINT))
            return
        for trace in traces:
            s = _summary(trace)
            status = trace.status if not trace.error else f"{trace.status} ({trace.error})"
            write_line(
                f"{trace.trace_id[:12]}  {_when(trace.start)}  {trace.agent:<14} "
                f"{_ms(trace.duration):>11}  {s['inferences']} inf  {s['tool_calls']} tools"
                f"  {s['tokens_in']}/{s['tokens_out']} tok  {status}"
            )

    exit_with(_read(body, verbose=verbose))


def _get(store: TraceStorePort, trace_id: str) -> Trace:
    trace = store.get(trace_id)
    if trace is None:
        raise ConfigurationError(
            f"No trace {trace_id!r} (or more than one starts with it).",
            hint="jarvis traces list shows the recorded runs.",
        )
    return trace


def _depths(trace: Trace) -> dict[str, int]:
    depths: dict[str, int] = {}
    for span in trace.spans:  # parents come before their children
        depths[span.span_id] = 0 if span.parent_id is None else depths.get(span.parent_id, 0) + 1
    return depths


def _detail(span: Span) -> str:
    a = span.attributes
    parts: list[str] = []
    if span.kind == "inference":
        tokens_in, tokens_out = _tokens(span)
        parts.append(f"{tokens_in}→{tokens_out} tok")
        first = a.get("first_token_seconds")
        if isinstance(first, int | float):
            parts.append(f"ttft {_ms(float(first))}")
        if "finish_reason" in a:
            parts.append(str(a["finish_reason"]))
    elif span.kind == "tool":
        if "loop_guard" in a:
            parts.append(f"loop guard: {a['loop_guard']} ({a.get('loop_guard_pattern', '')})")
        else:
            parts.append("ok" if span.ok else "failed")
            parts.append(f"{a.get('result_chars', 0)} chars")
    else:
        parts.append(str(a.get("stop_reason", "")))
        if a.get("error"):
            parts.append(str(a["error"]))
    if a.get("unfinished"):
        parts.append("unfinished")
    return "  ".join(p for p in parts if p)


def waterfall(trace: Trace, width: int = 32) -> list[str]:
    """The span tree of ``trace``, one line each, with a bar placing it in the run's time."""
    depths = _depths(trace)
    total = max(trace.duration, 1e-9)
    lines = [
        f"trace {trace.trace_id}  {trace.agent}  {trace.status}"
        + (f" ({trace.error})" if trace.error else "")
        + f"  {_when(trace.start)}  {_ms(trace.duration)}"
    ]
    if trace.remote_trace_id:
        lines.append(f"continues trace {trace.remote_trace_id} under span {trace.remote_parent_id}")
    for span in trace.spans:
        offset = min(max((span.start - trace.start) / total, 0.0), 1.0)
        begin = min(int(offset * width), width - 1)
        length = max(round(span.duration / total * width), 1)
        bar = " " * begin + "█" * min(length, width - begin)
        label = "  " * depths[span.span_id] + f"{span.kind} {span.name}"
        lines.append(f"{label[:40]:<40} |{bar:<{width}}| {_ms(span.duration):>11}  {_detail(span)}")
        for key, value in span.content.items():
            lines.append("  " * (depths[span.span_id] + 2) + f"{key}: {str(value)[:200]!s}")
    return lines


@app.command("show")
def show_trace(
    ctx: typer.Context,
    trace_id: IdArgument,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Show one run as a tree of spans with timings (a waterfall)."""

    def body() -> None:
        store, _ = _open(ctx, config)
        trace = _get(store, trace_id)
        if json_output:
            from jarvis.entrypoints.cli.trace_reads import trace_json

            write_json(trace_json(trace))
            return
        for line in waterfall(trace):
            write_line(line)

    exit_with(_read(body, verbose=verbose))


@app.command("export")
def export_trace(
    ctx: typer.Context,
    trace_id: IdArgument,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Print one run as OTLP JSON (what an OpenTelemetry collector takes on /v1/traces)."""

    def body() -> None:
        from jarvis.application.trace_export import to_otlp

        store, _ = _open(ctx, config)
        write_json(to_otlp(_get(store, trace_id)))

    exit_with(_read(body, verbose=verbose))


def stats(
    ctx: typer.Context,
    since: SinceOption = "7d",
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Runs, tokens, latency and errors per agent, engine, model and tool, from the traces."""

    def body() -> None:
        from jarvis.application.trace_stats import summarize
        from jarvis.entrypoints.cli.trace_reads import newest

        start = since_epoch(since)
        store, settings = _open(ctx, config)
        summary = summarize(newest(store, since=start, limit=1_000_000))
        recording = _recording(settings)
        summary["recording"] = recording
        if json_output:
            write_json(summary)
            return
        for line in _stats_lines(summary, since):
            write_line(line)
        if not recording:
            sys.stderr.write(f"jarvis: runs are not being recorded. {_OFF_HINT}\n")

    exit_with(_read(body, verbose=verbose))


def _figure(value: object) -> str:
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def _stats_lines(summary: JSONObject, since: str | None) -> list[str]:
    lines = [
        f"since {since or 'the first run'}: {summary['runs']} runs "
        f"({summary['failed_runs']} failed), tokens {summary['tokens_in']} in / "
        f"{summary['tokens_out']} out, latency p50 {_figure(summary['p50_ms'])} ms "
        f"p95 {_figure(summary['p95_ms'])} ms, first token p50 "
        f"{_figure(summary['ttft_p50_ms'])} ms p95 {_figure(summary['ttft_p95_ms'])} ms"
    ]
    for section in ("agents", "engines", "models", "tools"):
        groups = summary[section]
        if not isinstance(groups, dict) or not groups:
            continue
        lines.append(f"{section}:")
        for name, group in groups.items():
            if not isinstance(group, dict):
                continue
            lines.append(
                f"  {name or '-':<24} {group['count']:>6}  failed {group['failed']}"
                f"  tok {group['tokens_in']}/{group['tokens_out']}"
                f"  p50 {_figure(group['p50_ms'])} ms  p95 {_figure(group['p95_ms'])} ms"
                + (
                    f"  ttft p50 {_figure(group['ttft_p50_ms'])} ms"
                    if group["ttft_p50_ms"] is not None
                    else ""
                )
            )
    errors = summary["errors"]
    if isinstance(errors, dict) and errors:
        lines.append("errors:")
        lines.extend(f"  {kind:<24} {count:>6}" for kind, count in errors.items())
    return lines


def profile_lines(trace: Trace) -> list[str]:
    """``jarvis ask --profile``: each inference and tool call, then the run's totals."""
    lines = ["profile:"]
    depths = _depths(trace)
    tokens_in = tokens_out = 0
    inferences = tools = 0
    for span in trace.spans[1:]:
        indent = "  " * depths[span.span_id]
        if span.kind == "inference":
            t_in, t_out = _tokens(span)
            tokens_in += t_in
            tokens_out += t_out
            inferences += 1
        elif span.kind == "tool":
            tools += 1
        lines.append(
            f"{indent}{span.kind:<9} {span.name[:30]:<30} {_ms(span.duration):>11}  {_detail(span)}"
        )
    lines.append(
        f"  total     {trace.agent[:30]:<30} {_ms(trace.duration):>11}  {inferences} inferences"
        f"  {tools} tool calls  {tokens_in}→{tokens_out} tok  {trace.status}"
    )
    return lines
