"""A trace as OTLP JSON (``jarvis traces export``): what an OpenTelemetry collector takes
on ``/v1/traces``, with the GenAI semantic conventions' attribute names, written by hand
(no OpenTelemetry package is needed)."""

from __future__ import annotations

import hashlib
from math import isfinite, isnan

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.traces import Span, Trace

_GENAI_NAMES: dict[str, str] = {
    "engine": "gen_ai.system",
    "model": "gen_ai.request.model",
    "tokens_in": "gen_ai.usage.input_tokens",
    "tokens_out": "gen_ai.usage.output_tokens",
    "finish_reason": "gen_ai.response.finish_reasons",
    "agent": "gen_ai.agent.name",
}


def exported_span_id(trace_id: str, span_id: str) -> str:
    """16 hex digits, stable for a trace's span (its id in OTLP)."""
    return hashlib.sha256(f"{trace_id}/{span_id}".encode()).hexdigest()[:16]


def _span_id(trace: Trace, span: Span) -> str:
    return exported_span_id(trace.trace_id, span.span_id)


def _trace_id(trace: Trace) -> str:
    if trace.remote_trace_id:
        return trace.remote_trace_id
    digits = "".join(c for c in trace.trace_id.lower() if c in "0123456789abcdef")
    if len(digits) == 32:
        return digits
    return hashlib.sha256(trace.trace_id.encode()).hexdigest()[:32]


def _value(value: JSONValue) -> JSONObject:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if not isfinite(value):  # as OTLP's JSON writes them: NaN is no JSON number
            return {"doubleValue": "NaN" if isnan(value) else f"{'-' if value < 0 else ''}Infinity"}
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": str(value)}


def _attributes(span: Span) -> list[JSONValue]:
    operation = {"run": "invoke_agent", "inference": "chat", "tool": "execute_tool"}[span.kind]
    pairs: list[tuple[str, JSONValue]] = [("gen_ai.operation.name", operation)]
    if span.kind == "tool":
        pairs.append(("gen_ai.tool.name", span.name))
    for key, value in span.attributes.items():
        name = _GENAI_NAMES.get(key, f"jarvis.{key}")
        if key == "finish_reason":
            value = [value]
        pairs.append((name, value))
    for key, value in span.content.items():
        pairs.append((f"jarvis.content.{key}", value))
    result: list[JSONValue] = []
    for key, value in pairs:
        if isinstance(value, list):
            entry: JSONObject = {
                "key": key,
                "value": {"arrayValue": {"values": [_value(v) for v in value]}},
            }
        else:
            entry = {"key": key, "value": _value(value)}
        result.append(entry)
    return result


def _nanos(seconds: float) -> str:
    return str(round(seconds * 1_000_000_000))


def otlp_spans(trace: Trace) -> list[JSONValue]:
    """The spans of ``trace`` in OTLP's JSON encoding."""
    trace_id = _trace_id(trace)
    ids = {span.span_id: _span_id(trace, span) for span in trace.spans}
    spans: list[JSONValue] = []
    for span in trace.spans:
        name = {
            "run": f"invoke_agent {span.name}",
            "inference": f"chat {span.name}",
            "tool": f"execute_tool {span.name}",
        }[span.kind]
        entry: JSONObject = {
            "traceId": trace_id,
            "spanId": ids[span.span_id],
            "name": name,
            "kind": 3 if span.kind == "inference" else 1,  # CLIENT / INTERNAL
            "startTimeUnixNano": _nanos(span.start),
            "endTimeUnixNano": _nanos(span.start + span.duration),
            "attributes": _attributes(span),
            "status": {"code": 1} if span.ok else {"code": 2},
        }
        if span.parent_id is not None and span.parent_id in ids:
            entry["parentSpanId"] = ids[span.parent_id]
        elif span.parent_id is None and trace.remote_parent_id:
            entry["parentSpanId"] = trace.remote_parent_id  # the caller's span
        spans.append(entry)
    return spans


def otlp_request(spans: list[JSONValue]) -> JSONObject:
    """An OTLP ``ExportTraceServiceRequest`` (JSON encoding) carrying ``spans``."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "jarvis"}}]
                },
                "scopeSpans": [{"scope": {"name": "jarvis"}, "spans": spans}],
            }
        ]
    }


def to_otlp(trace: Trace) -> JSONObject:
    """``trace`` as an OTLP ``ExportTraceServiceRequest`` in its JSON encoding."""
    return otlp_request(otlp_spans(trace))
