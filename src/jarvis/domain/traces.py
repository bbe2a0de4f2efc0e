"""What a run did, kept after it: a trace is the run and its inferences and tool calls, as
a tree of spans with timings and token counts.

A trace holds no prompt, answer, argument or result unless whoever records it was asked to
keep content (``content`` of a span, empty otherwise): the timings and counts are what a
user needs to see where a run spent its time and its tokens; the words are theirs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import isfinite
from typing import Literal, TypeAlias

from jarvis.domain.json_types import JSONObject
from jarvis.domain.quick_init import quick_init
from jarvis.domain.well_formed import well_formed

SpanKind: TypeAlias = Literal["run", "inference", "tool"]
TraceStatus: TypeAlias = Literal["ok", "error", "cancelled"]

MAX_CONTENT_CHARS = 4_000
"""The most characters of one content field a trace keeps (``[traces] content = true``)."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One timed step of a run. ``start`` is seconds since the epoch (UTC)."""

    span_id: str
    parent_id: str | None
    kind: SpanKind
    name: str
    """The agent (``run``), the model (``inference``) or the tool (``tool``)."""
    start: float
    duration: float
    ok: bool = True
    attributes: JSONObject = field(default_factory=dict)
    """Engine, model, tokens, time to first token, finish reason, result size, loop-guard
    verdict...: numbers and names, never content."""
    content: JSONObject = field(default_factory=dict)
    """Input and output text, only when content recording is on."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """One top-level run and every span below it (``spans[0]`` is the run itself)."""

    trace_id: str
    agent: str
    start: float
    duration: float
    status: TraceStatus
    error: str = ""
    """Why the run failed (its stop reason, ``engine_error``...); empty when it did not."""
    spans: tuple[Span, ...] = ()
    remote_trace_id: str = ""
    """The W3C trace this run continues (a caller's ``traceparent``): 32 hex digits, the
    trace id it is exported under; empty when it started a trace of its own. ``trace_id``
    stays this run's own key, as one caller's trace may hold many runs."""
    remote_parent_id: str = ""
    """The caller's span (16 hex digits) the run span hangs under, with ``remote_trace_id``."""

    @property
    def failed(self) -> bool:
        return self.status != "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceQuery:
    """Which traces to list: newest first, at most ``limit``."""

    since: float | None = None
    """Seconds since the epoch; ``None``: from the first."""
    agent: str | None = None
    failed_only: bool = False
    limit: int = 100


TraceRecord: TypeAlias = tuple[str, str, float, int, int, str]
"""A trace as a store keeps it: ``(trace_id, agent, start, failed, size, record)``, where
``record`` is the trace as JSON (what :func:`trace_from_record` reads), ``size`` its length
in UTF-8 bytes and ``failed`` 1 or 0. A plain tuple of strings and numbers, which Python's
garbage collector stops walking: the trace writer holds each finished run's record until
its thread writes the batch, and a collector that walked the run's objects meanwhile (and
promoted them to its oldest generation) cost more than recording the run."""


class TraceStoreError(Exception):
    """The trace store cannot be read or written (full or read-only disk, locked or damaged
    database). A run never fails because of it."""


LATEST_TIME = 18_446_744_073.0
"""The last second (since the epoch) a span can carry: OTLP times are unsigned 64-bit
nanoseconds (the year 2554)."""


def times_problem(trace: Trace) -> str:
    """Why ``trace`` cannot be kept or sent, or ``""``: a start or duration that is not a
    finite number, or a span that starts or ends before the epoch or after
    :data:`LATEST_TIME` (no record or OTLP span has a place for it). The store and the
    exporter leave such a trace out alone, and a record read back with one is damaged
    (:func:`trace_from_record`)."""
    # each trace is checked as its run ends, on the event loop: first by comparisons alone,
    # which every finite time in range passes (NaN and the infinities fail them), and only
    # a trace that fails them is looked at closely, for its reason
    start = trace.start
    end = start + trace.duration
    if 0.0 <= start <= LATEST_TIME and 0.0 <= end <= LATEST_TIME:
        for span in trace.spans:
            start = span.start
            end = start + span.duration
            if not (0.0 <= start <= LATEST_TIME and 0.0 <= end <= LATEST_TIME):
                break
        else:
            return ""
    spans = [(trace.start, trace.duration)] + [(s.start, s.duration) for s in trace.spans]
    for start, duration in spans:
        if not (isfinite(start) and isfinite(duration)):
            return f"trace {trace.trace_id}: a start or duration is not a finite number"
        if not (0.0 <= start <= LATEST_TIME and 0.0 <= start + duration <= LATEST_TIME):
            return f"trace {trace.trace_id}: a span's times are outside 1970-2554"
    return ""


def trace_head(trace: Trace) -> dict[str, object]:
    """What :func:`trace_fields` holds before its spans (its keys in their order): for an
    encoder that writes the spans themselves, in the order of their fields (orjson writes a
    dataclass so, in a third of the time it takes to build their dicts here)."""
    head: dict[str, object] = {
        "trace_id": trace.trace_id,
        "agent": trace.agent,
        "start": trace.start,
        "duration": trace.duration,
        "status": trace.status,
        "error": trace.error,
    }
    if trace.remote_trace_id:
        head["remote_trace_id"] = trace.remote_trace_id
        head["remote_parent_id"] = trace.remote_parent_id
    return head


def trace_fields(trace: Trace) -> dict[str, object]:
    """``trace`` as the JSON object a store keeps (its keys in their order), for any encoder
    (built by hand: a dataclass walk by the encoder takes three times as long)."""
    head = trace_head(trace)
    head["spans"] = [
        {
            "span_id": s.span_id,
            "parent_id": s.parent_id,
            "kind": s.kind,
            "name": s.name,
            "start": s.start,
            "duration": s.duration,
            "ok": s.ok,
            "attributes": s.attributes,
            "content": s.content,
        }
        for s in trace.spans
    ]
    return head


def trace_to_record(trace: Trace) -> str:
    """``trace`` as one line of JSON (what a store keeps); a lone surrogate anywhere in it (a
    name or an attribute from an engine) is written U+FFFD (:func:`well_formed`): the UTF-8
    of SQLite and of OTLP's protobuf strings has no place for it, and a trace holding one
    would be refused whole, so a client could keep its runs out of the record with one."""
    text = json.dumps(
        trace_fields(trace), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    return well_formed(text)


def trace_to_row(trace: Trace) -> TraceRecord:
    """``trace`` as a :data:`TraceRecord`, its record written by :func:`trace_to_record`."""
    record = trace_to_record(trace)
    return (
        trace.trace_id,
        trace.agent,
        trace.start,
        int(trace.failed),
        len(record.encode()),
        record,
    )


_KINDS: dict[str, SpanKind] = {"run": "run", "inference": "inference", "tool": "tool"}
_STATUSES: dict[str, TraceStatus] = {"ok": "ok", "error": "error", "cancelled": "cancelled"}


def _object(value: object) -> JSONObject:
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not isfinite(value):
        raise ValueError(f"a number out of range ({text[:20]})")
    return value


def _not_a_number(text: str) -> float:
    raise ValueError(f"{text} is not a number a trace holds")


_RECORD = json.JSONDecoder(parse_float=_finite, parse_constant=_not_a_number)
"""Reads a record: the writer keeps no number that is not finite (JSON has none), so a
``NaN`` or ``1e999`` anywhere in one (an attribute, a time) means it was damaged, and
showing it would fail later (``--json`` cannot write it)."""


def trace_from_record(text: str) -> Trace:
    """The trace :func:`trace_to_record` wrote; ``ValueError`` when ``text`` is not one,
    times out of range included (:func:`times_problem`): the writer never keeps such a
    trace, so a record holding one was damaged (or written by hand), and showing it would
    fail later (a date past the year 9999, OTLP's unsigned nanoseconds below zero)."""
    return checked_times(trace_of_fields(decode_record(text)))


def decode_record(text: str) -> JSONObject:
    """A record's JSON object; ``ValueError`` when ``text`` is not one (a number that is not
    finite included)."""
    try:
        return _object(_RECORD.decode(text))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def checked_times(trace: Trace) -> Trace:
    """``trace``, read from a record; ``ValueError`` when its times are out of range
    (:func:`times_problem`)."""
    problem = times_problem(trace)
    if problem:
        raise ValueError(problem)
    return trace


def trace_of_fields(data: JSONObject) -> Trace:
    """The trace in a decoded record; ``ValueError`` for a field missing or of a wrong
    type."""
    spans = data.get("spans")
    if not isinstance(spans, list):
        raise ValueError("no spans")
    try:
        return Trace(
            trace_id=str(data["trace_id"]),
            agent=str(data["agent"]),
            start=float(str(data["start"])),
            duration=float(str(data["duration"])),
            status=_STATUSES[str(data["status"])],
            error=str(data.get("error", "")),
            remote_trace_id=str(data.get("remote_trace_id", "")),
            remote_parent_id=str(data.get("remote_parent_id", "")),
            spans=tuple(
                Span(
                    span_id=str(s["span_id"]),
                    parent_id=None if s["parent_id"] is None else str(s["parent_id"]),
                    kind=_KINDS[str(s["kind"])],
                    name=str(s["name"]),
                    start=float(str(s["start"])),
                    duration=float(str(s["duration"])),
                    ok=bool(s["ok"]),
                    attributes=_object(s.get("attributes", {})),
                    content=_object(s.get("content", {})),
                )
                for s in map(_object, spans)
            ),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"missing or wrong field: {exc}") from exc


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A caller's span, from a W3C ``traceparent`` header: a run continues its trace."""

    trace_id: str
    """32 lowercase hex digits, not all zero."""
    span_id: str
    """16 lowercase hex digits, not all zero."""
    flags: str
    """2 hex digits (``01``: sampled)."""

    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"


_HEX = frozenset("0123456789abcdef")


def _hex(text: str, size: int) -> bool:
    return len(text) == size and set(text) <= _HEX and text != "0" * size


def parse_traceparent(value: str) -> TraceParent | None:
    """The ``traceparent`` of W3C Trace Context, version ``00`` only, strictly: anything
    else (another version, upper case, an all-zero id, extra fields, another length) is
    ``None``, and the run starts a trace of its own."""
    if len(value) != 55:
        return None
    parts = value.split("-")
    if len(parts) != 4 or parts[0] != "00":
        return None
    _, trace_id, span_id, flags = parts
    if not (_hex(trace_id, 32) and _hex(span_id, 16)):
        return None
    if len(flags) != 2 or not set(flags) <= _HEX:
        return None
    return TraceParent(trace_id=trace_id, span_id=span_id, flags=flags)
