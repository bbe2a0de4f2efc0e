"""``jarvis stats``: what a period of use cost, summed from the traces (no second store).

Per agent, engine, model and tool: how many runs, inferences or calls, tokens in and out,
the median and 95th percentile of latency and of time to first token, and errors by kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from jarvis.domain.json_types import JSONObject
from jarvis.domain.traces import Span, Trace


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``values`` (``None`` for none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return ordered[rank - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


@dataclass(slots=True)
class _Group:
    count: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latencies: list[float] = field(default_factory=list)
    first_tokens: list[float] = field(default_factory=list)

    def to_json(self) -> JSONObject:
        return {
            "count": self.count,
            "failed": self.failed,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "p50_ms": _ms(percentile(self.latencies, 0.5)),
            "p95_ms": _ms(percentile(self.latencies, 0.95)),
            "ttft_p50_ms": _ms(percentile(self.first_tokens, 0.5)),
            "ttft_p95_ms": _ms(percentile(self.first_tokens, 0.95)),
        }


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _first_token(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(slots=True)
class _Tally:
    """The groups being summed, by agent, engine, model and tool, and errors by kind."""

    total: _Group = field(default_factory=_Group)
    agents: dict[str, _Group] = field(default_factory=dict)
    engines: dict[str, _Group] = field(default_factory=dict)
    models: dict[str, _Group] = field(default_factory=dict)
    tools: dict[str, _Group] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, trace: Trace) -> None:
        total = self.total
        total.count += 1
        total.latencies.append(trace.duration)
        agent = self.agents.setdefault(trace.agent, _Group())
        agent.count += 1
        agent.latencies.append(trace.duration)
        if trace.failed:
            total.failed += 1
            agent.failed += 1
            self.error(trace.error or trace.status)
        for span in trace.spans:
            if span.kind == "inference":
                self.inference(span, agent)
            elif span.kind == "tool":
                self.tool(span)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def inference(self, span: Span, agent: _Group) -> None:
        attributes = span.attributes
        tokens_in = _int(attributes.get("tokens_in"))
        tokens_out = _int(attributes.get("tokens_out"))
        first = _first_token(attributes.get("first_token_seconds"))
        groups = (
            self.engines.setdefault(str(attributes.get("engine", "")), _Group()),
            self.models.setdefault(span.name, _Group()),
        )
        for group in groups:
            group.count += 1
            group.failed += 0 if span.ok else 1
            group.tokens_in += tokens_in
            group.tokens_out += tokens_out
            group.latencies.append(span.duration)
            if first is not None:
                group.first_tokens.append(first)
        for group in (self.total, agent):
            group.tokens_in += tokens_in
            group.tokens_out += tokens_out
        if first is not None:
            self.total.first_tokens.append(first)

    def tool(self, span: Span) -> None:
        tool = self.tools.setdefault(span.name, _Group())
        tool.count += 1
        tool.latencies.append(span.duration)
        if not span.ok:
            tool.failed += 1
            verdict = span.attributes.get("loop_guard")
            self.error(f"loop_guard_{verdict}" if verdict else "tool_failed")


def summarize(traces: Iterable[Trace]) -> JSONObject:
    """The ``jarvis stats`` figures of ``traces``."""
    tally = _Tally()
    for trace in traces:
        tally.add(trace)
    summary = tally.total.to_json()
    runs = summary.pop("count")
    failed = summary.pop("failed")
    return {
        "runs": runs,
        "failed_runs": failed,
        **summary,
        "agents": {name: g.to_json() for name, g in sorted(tally.agents.items())},
        "engines": {name: g.to_json() for name, g in sorted(tally.engines.items())},
        "models": {name: g.to_json() for name, g in sorted(tally.models.items())},
        "tools": {name: g.to_json() for name, g in sorted(tally.tools.items())},
        "errors": dict(sorted(tally.errors.items())),
    }
