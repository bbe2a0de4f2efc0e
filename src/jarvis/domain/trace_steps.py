"""A recorded run's steps as a trace: the record a store keeps, and the spans it is read as.

A finished run (:data:`~jarvis.domain.run.steps.TraceSteps`) is written as it was recorded,
its steps as JSON arrays (:func:`steps_fields`: content cut and masked, nothing else made),
so that writing a run's trace costs its encoding and its insert. Its spans are made when it is read
(:func:`trace_of_steps`), or when it is exported or profiled (:func:`trace_of_log`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import TypeAlias

from jarvis.domain.cut_text import cut_masked
from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.steps import (
    GUARD,
    INFERENCE,
    INFERENCE_END,
    RUN,
    RUN_END,
    STARTS,
    TOOL,
    TOOL_END,
    Step,
    TraceSteps,
)
from jarvis.domain.traces import (
    LATEST_TIME,
    MAX_CONTENT_CHARS,
    Span,
    SpanKind,
    Trace,
    TraceParent,
    TraceRecord,
    TraceStatus,
    checked_times,
    decode_record,
    trace_of_fields,
)
from jarvis.domain.well_formed import well_formed

STEPS_VERSION = 2
"""``"v"`` of a record holding steps (a record without it holds spans)."""

_CONTENT_AT: dict[object, int] = {RUN: 4, TOOL: 5, TOOL_END: 5}
"""Where each kind of step keeps its content (``None`` unless content is kept)."""


def _clipped(steps: Sequence[Step], mask: Callable[[str], str]) -> list[Step]:
    """``steps`` with their content cut and masked (a lone surrogate as U+FFFD)."""
    clipped: list[Step] = []
    for step in steps:
        at = _CONTENT_AT.get(step[0])
        if at is None or step[at] is None:
            clipped.append(step)
        else:
            text = well_formed(cut_masked(str(step[at]), MAX_CONTENT_CHARS, mask))
            clipped.append((*step[:at], text, *step[at + 1 :]))
    return clipped


def steps_fields(trace: TraceSteps) -> dict[str, object]:
    """``trace`` as the JSON object a store keeps (steps as arrays, content cut and
    masked)."""
    trace_id, wall, remote, dropped, steps, mask = trace
    return {
        "v": STEPS_VERSION,
        "trace_id": trace_id,
        "wall": wall,
        "remote_trace_id": "" if remote is None else remote.trace_id,
        "remote_parent_id": "" if remote is None else remote.span_id,
        "dropped": dropped,
        "steps": steps if mask is None else _clipped(steps, mask),
    }


PlainSteps: TypeAlias = tuple[str, float, "tuple[str, str] | None", int, Sequence[Step]]
"""A finished trace as plain values, JSON can hold them all: ``(trace_id, wall, remote,
dropped, steps)``, ``remote`` the caller's ``(trace id, span id)``, content cut and
masked."""


def plain_steps(trace: TraceSteps) -> PlainSteps:
    """``trace`` as :data:`PlainSteps` (what a store may keep of it as it is)."""
    trace_id, wall, remote, dropped, steps, mask = trace
    return (
        trace_id,
        wall,
        None if remote is None else (remote.trace_id, remote.span_id),
        dropped,
        steps if mask is None else _clipped(steps, mask),
    )


def trace_of_plain(plain: Sequence[object]) -> TraceSteps:
    """The trace :data:`PlainSteps` (or its JSON read back) hold, content as it was kept;
    ``ValueError`` when ``plain`` is not one."""
    if not isinstance(plain, list | tuple) or len(plain) != 5:
        raise ValueError("not a recorded run's [trace_id, wall, remote, dropped, steps]")
    trace_id, wall, remote, dropped, steps = plain
    if not isinstance(steps, list | tuple) or not steps:
        raise ValueError("a recorded run without steps")
    if remote is None:
        parent = None
    elif isinstance(remote, list | tuple) and len(remote) == 2:
        parent = TraceParent(trace_id=_text(remote[0]), span_id=_text(remote[1]), flags="01")
    else:
        raise ValueError("a recorded run's caller is not [trace_id, span_id]")
    kept = tuple(step if isinstance(step, tuple) else tuple(step) for step in steps)
    if not all(kept):
        raise ValueError("a recorded run's step is empty")
    return _text(trace_id), _number(wall), parent, _count(dropped), kept, None


def encoded_runs(
    runs: Sequence[TraceSteps], encode: Callable[[TraceSteps], TraceRecord]
) -> tuple[list[TraceRecord], list[str]]:
    """Each run of ``runs`` encoded by ``encode``, and the reason of each one it refused
    (``ValueError``): a store saving runs one by one leaves out only those."""
    records: list[TraceRecord] = []
    refused: list[str] = []
    for run in runs:
        try:
            records.append(encode(run))
        except ValueError as exc:
            refused.append(str(exc))
    return records, refused


def steps_head(trace: TraceSteps) -> tuple[str, str, float, int]:
    """``(trace_id, agent, start, failed)`` of ``trace``'s record; ``ValueError`` when its
    start is outside 1970-2554 (no record or OTLP span has a place for it)."""
    trace_id, wall, _, _, steps, _ = trace
    first, last = steps[0], steps[-1]
    if not 0.0 <= wall <= LATEST_TIME:
        raise ValueError(f"a trace's start is outside 1970-2554 ({wall!r})")
    failed = last[0] != RUN_END or last[2] != 0 or last[4] in ("error", "cancelled")
    return trace_id, str(first[3]), wall, int(failed)


def steps_to_row(trace: TraceSteps) -> TraceRecord:
    """``trace`` as a :data:`TraceRecord`, encoded by the standard library (a lone surrogate
    written U+FFFD, as :func:`~jarvis.domain.traces.trace_to_record` does)."""
    trace_id, agent, start, failed = steps_head(trace)
    record = well_formed(
        json.dumps(steps_fields(trace), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    )
    return trace_id, well_formed(agent), start, failed, len(record.encode()), record


def trace_of_log(trace: TraceSteps) -> Trace:
    """The trace ``trace`` holds, its spans made now (to export it, or to profile the
    run)."""
    return trace_of_steps(steps_fields(trace))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("not a number")
    return float(value)


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    return value


def _inference(step: Step, end: Step | None) -> tuple[str, JSONObject, bool]:
    name = _text(step[4])
    attributes: JSONObject = {"engine": _text(step[3]), "model": name}
    if end is None:
        return name, attributes, False
    finish = _text(end[5])
    attributes["tokens_in"] = _count(end[3])
    attributes["tokens_out"] = _count(end[4])
    attributes["finish_reason"] = finish
    attributes["tool_calls"] = _count(end[6])
    if end[7] is not None:
        attributes["first_token_seconds"] = round(_number(end[7]), 6)
    return name, attributes, finish != "error"


def _tool(step: Step, end: Step | None, content: JSONObject) -> tuple[str, JSONObject, bool]:
    if step[5] is not None:
        content["arguments"] = _text(step[5])
    if end is None:
        return _text(step[3]), {}, False
    if end[5] is not None:
        content["result"] = _text(end[5])
    ok = bool(end[4])
    return _text(step[3]), {"result_chars": _count(end[3]), "success": ok}, ok


def _run(step: Step, end: Step | None, content: JSONObject) -> tuple[str, JSONObject, bool]:
    name = _text(step[3])
    attributes: JSONObject = {"agent": name}
    if step[4] is not None:
        content["input"] = _text(step[4])
    if end is None:
        return name, attributes, False
    stop = _text(end[4])
    attributes["turns"] = _count(end[3])
    attributes["stop_reason"] = stop
    if end[5]:
        attributes["error"] = _text(end[5])
    return name, attributes, stop not in ("error", "cancelled")


def _span(
    step: Step,
    end: Step | None,
    number: int,
    numbers: Mapping[int, int],
    times: tuple[float, float],
) -> Span:
    """The span ``step`` starts (the ``number``-th), ``end`` its end (``None``: cut at the
    trace's end, unfinished); ``times``: the offset from monotonic to epoch seconds, and the
    trace's end."""
    offset, last = times
    code, at = step[0], _number(step[1])
    parent = _count(step[2])
    content: JSONObject = {}
    kind: SpanKind
    if code == INFERENCE:
        kind = "inference"
        name, attributes, ok = _inference(step, end)
    elif code == TOOL:
        kind = "tool"
        name, attributes, ok = _tool(step, end, content)
    elif code == RUN:
        kind = "run"
        name, attributes, ok = _run(step, end, content)
    elif code == GUARD:
        kind, name, ok = "tool", _text(step[3]), False
        attributes = {"loop_guard": _text(step[4]), "loop_guard_pattern": _text(step[5])}
        end = step  # a verdict takes no time
    else:
        raise ValueError(f"not a step that starts a span ({code!r})")
    if end is None:
        duration = last - at
        attributes["unfinished"] = True
    else:
        duration = _number(end[1]) - at
    return Span(
        span_id=f"{number:04x}",
        parent_id=None if parent < 0 else f"{numbers[parent]:04x}",
        kind=kind,
        name=name,
        start=offset + at,
        duration=duration if duration > 0.0 else 0.0,
        ok=ok,
        attributes=attributes,
        content=content,
    )


def _ends(steps: Sequence[Sequence[object]]) -> tuple[dict[int, int], dict[int, Step]]:
    """The number of each span's start (by its index) and each span's end (by its start's
    index)."""
    numbers: dict[int, int] = {}
    ends: dict[int, Step] = {}
    for index, step in enumerate(steps):
        code = step[0]
        if code in STARTS:
            parent = _count(step[2])
            if (parent == -1) != (index == 0) or (parent != -1 and parent not in numbers):
                raise ValueError(f"step {index} hangs under no span before it")
            numbers[index] = len(numbers) + 1
        elif code in (RUN_END, INFERENCE_END, TOOL_END):
            started = _count(step[2])
            if started not in numbers or started in ends:
                raise ValueError(f"step {index} ends no span it may end")
            ends[started] = tuple(step)
        else:
            raise ValueError(f"step {index} is of no kind")
    return numbers, ends


def trace_of_steps(data: Mapping[str, object]) -> Trace:
    """The trace a record of steps holds (:func:`steps_fields`, or its JSON read back);
    ``ValueError`` for a field missing or of a wrong type, or a step that fits nowhere."""
    try:
        steps = data["steps"]
        if not isinstance(steps, list | tuple) or not steps:
            raise ValueError("no steps")
        steps = [tuple(step) for step in steps if isinstance(step, list | tuple) and step]
        numbers, ends = _ends(steps)
        first = steps[0]
        if first[0] != RUN or _count(first[2]) != -1:
            raise ValueError("the first step is not the trace's run")
        run_end = ends.get(0)
        last = _number((run_end or steps[-1])[1])
        times = (_number(data["wall"]) - _number(first[1]), last)
        spans = [
            _span(step, ends.get(index), number, numbers, times)
            for index, number in numbers.items()
            for step in (steps[index],)
        ]
        # after the run, in the order they started (an inference is recorded as it ends:
        # concurrent ones, ``llm_batch``'s, in the order they ended)
        spans[1:] = sorted(spans[1:], key=attrgetter("start"))
        dropped = _count(data.get("dropped", 0))
        if dropped:
            spans[0].attributes["dropped_spans"] = dropped
        stop = "error" if run_end is None else _text(run_end[4])
        status: TraceStatus = (
            "cancelled" if stop == "cancelled" else "error" if stop == "error" else "ok"
        )
        error = "" if run_end is None else _text(run_end[5])
        return Trace(
            trace_id=_text(data["trace_id"]),
            agent=spans[0].name,
            start=spans[0].start,
            duration=spans[0].duration,
            status=status,
            error=(error or "error") if status == "error" else "",
            spans=tuple(spans),
            remote_trace_id=_text(data.get("remote_trace_id", "")),
            remote_parent_id=_text(data.get("remote_parent_id", "")),
        )
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"missing or wrong field: {exc!r}") from exc


def read_trace(text: str) -> Trace:
    """The trace a store's record holds, of steps (:func:`steps_fields`) or of spans
    (:func:`~jarvis.domain.traces.trace_to_record`); ``ValueError`` when ``text`` is not one,
    times out of range included (the writer never keeps such a trace: the record was
    damaged, or written by hand)."""
    data = decode_record(text)
    if data.get("v") == STEPS_VERSION:
        return checked_times(trace_of_steps(data))
    return checked_times(trace_of_fields(data))
