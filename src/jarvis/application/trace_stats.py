"""``jarvis stats``: what a period of use cost, summed from the traces (no second store).

Per agent, engine, model and tool: how many runs, inferences or calls, tokens in and out,
the median and 95th percentile of latency and of time to first token, and errors by kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from jarvis.domain.json_types import JSONObject
from jarvis.domain.traces import Trace


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


def summarize(traces: Iterable[Trace]) -> JSONObject:
    """The ``jarvis stats`` figures of ``traces``."""
    agents: dict[str, _Group] = {}
    engines: dict[str, _Group] = {}
    models: dict[str, _Group] = {}
    tools: dict[str, _Group] = {}
    errors: dict[str, int] = {}
    total = _Group()
    for trace in traces:
        total.count += 1
        total.latencies.append(trace.duration)
        agent = agents.setdefault(trace.agent, _Group())
        agent.count += 1
        agent.latencies.append(trace.duration)
        if trace.failed:
            total.failed += 1
            agent.failed += 1
            kind = trace.error or trace.status
            errors[kind] = errors.get(kind, 0) + 1
        for span in trace.spans:
            attributes = span.attributes
            if span.kind == "inference":
                tokens_in = _int(attributes.get("tokens_in"))
                tokens_out = _int(attributes.get("tokens_out"))
                first = attributes.get("first_token_seconds")
                groups = (
                    engines.setdefault(str(attributes.get("engine", "")), _Group()),
                    models.setdefault(span.name, _Group()),
                )
                for group in groups:
                    group.count += 1
                    group.failed += 0 if span.ok else 1
                    group.tokens_in += tokens_in
                    group.tokens_out += tokens_out
                    group.latencies.append(span.duration)
                    if isinstance(first, int | float) and not isinstance(first, bool):
                        group.first_tokens.append(float(first))
                total.tokens_in += tokens_in
                total.tokens_out += tokens_out
                agent.tokens_in += tokens_in
                agent.tokens_out += tokens_out
                if isinstance(first, int | float) and not isinstance(first, bool):
                    total.first_tokens.append(float(first))
            elif span.kind == "tool":
                tool = tools.setdefault(span.name, _Group())
                tool.count += 1
                tool.latencies.append(span.duration)
                if not span.ok:
                    tool.failed += 1
                    verdict = attributes.get("loop_guard")
                    kind = f"loop_guard_{verdict}" if verdict else "tool_failed"
                    errors[kind] = errors.get(kind, 0) + 1
    summary = total.to_json()
    runs = summary.pop("count")
    failed = summary.pop("failed")
    return {
        "runs": runs,
        "failed_runs": failed,
        **summary,
        "agents": {name: g.to_json() for name, g in sorted(agents.items())},
        "engines": {name: g.to_json() for name, g in sorted(engines.items())},
        "models": {name: g.to_json() for name, g in sorted(models.items())},
        "tools": {name: g.to_json() for name, g in sorted(tools.items())},
        "errors": dict(sorted(errors.items())),
    }
