"""A trace as the SQLite store keeps it: one JSON record, encoded by orjson.

The record is the one :func:`~jarvis.domain.traces.trace_to_record` writes (the same keys
in the same order, read back by :func:`~jarvis.domain.traces.trace_from_record`); with
orjson it takes about a sixth of the standard library's CPU (3 µs for a two-call run's
trace, where ``json`` took 16-19 µs, the larger part of what the trace writer's thread
spent). Only the spelling of some numbers differs (``1e-5`` for ``1e-05``), not their
value. A trace orjson refuses (an integer past 64 bits) is encoded by the standard library
instead; a start or duration that is not a finite number is refused, as the standard
library refuses it.
"""

from __future__ import annotations

import orjson

from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import steps_fields, steps_head, steps_to_row
from jarvis.domain.traces import Trace, TraceRecord, times_problem, trace_head, trace_to_row


def encode_trace(trace: Trace) -> TraceRecord:
    """``trace`` as a row of ``jarvis_traces``; ``ValueError`` when it cannot be encoded."""
    problem = times_problem(trace)
    if problem:
        raise ValueError(problem)
    head = trace_head(trace)
    head["spans"] = trace.spans  # a span is a dataclass: orjson writes its fields in order,
    # the keys of trace_fields' spans (a third less CPU than building their dicts)
    try:
        data = orjson.dumps(head)
    except orjson.JSONEncodeError:
        return trace_to_row(trace)
    return (trace.trace_id, trace.agent, trace.start, int(trace.failed), len(data), data.decode())


def encode_steps(trace: TraceSteps) -> TraceRecord:
    """The trace of a run recorded as steps as a row of ``jarvis_traces`` (its steps as
    JSON arrays: nothing is made of them); ``ValueError`` when it cannot be encoded. What
    orjson refuses (a lone surrogate in a name, an integer past 64 bits) is encoded by the
    standard library instead."""
    trace_id, agent, start, failed = steps_head(trace)
    try:
        data = orjson.dumps(steps_fields(trace))
    except orjson.JSONEncodeError:
        return steps_to_row(trace)
    return trace_id, agent, start, failed, len(data), data.decode()
