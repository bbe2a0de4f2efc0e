"""A batch of traces as the SQLite store writes it: one row for the whole batch.

The trace writer hands the store a few hundred records at once; inserting them one row at
a time (two indexes and a size trigger each) cost 4-6 µs of CPU a trace, the larger part of
what recording a tool run adds. One row holding the batch costs 1.4-1.8 µs: the records are
joined by line breaks (JSON text holds none: its strings escape them), so none is encoded
twice, and their heads (id, agent, start, failed, size) are one JSON array beside them. The
store expands a batch into rows when it is first read (:mod:`.store`).

The runs the bus recorded (:data:`~jarvis.domain.run.steps.TraceSteps`, all but a few of the
traces written) are not even made records: their steps, as they were recorded, are one
JSON array for the whole batch (:func:`pack_steps`: one call of orjson, 0.4 µs a trace,
where making and packing each run's record took 1.5 µs), and each is made its record
when the batch is expanded. Less work in the writer's thread is less taken from the event
loop that shares the machine with it: its caches, and the core.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import NamedTuple

import orjson

from jarvis.adapters.sqlite_traces.record import encode_steps
from jarvis.domain.run.steps import TraceSteps
from jarvis.domain.trace_steps import plain_steps, trace_of_plain
from jarvis.domain.traces import LATEST_TIME, TraceRecord

STEPS = "steps"
"""The ``heads`` of a batch of recorded runs (its ``records``: their steps, a JSON array of
:data:`~jarvis.domain.trace_steps.PlainSteps`, as bytes). A batch of records has a JSON
array there."""


class PackedBatch(NamedTuple):
    """A row of ``jarvis_trace_batches``: ``newest`` is the latest start of its traces
    (pruning by age drops the batch once it is older), ``size`` the sum of their sizes."""

    newest: float
    traces: int
    size: int
    heads: str
    records: str | bytes


def pack_batch(records: Sequence[TraceRecord]) -> PackedBatch | None:
    """``records`` as one row, or ``None`` when they cannot be (a record holding a line
    break, which this store's encoders never write; a start that is not a finite number):
    those are inserted as rows, which refuse what they must."""
    if not records:
        return None
    text = "\n".join([record[5] for record in records])
    if text.count("\n") != len(records) - 1:
        return None
    if not math.isfinite(sum([record[2] for record in records])):
        return None
    heads = [record[:5] for record in records]
    try:
        heads_text = orjson.dumps(heads).decode()
    except orjson.JSONEncodeError:  # a lone surrogate in an id or an agent's name
        heads_text = json.dumps(heads)
    return PackedBatch(
        newest=max([record[2] for record in records]),
        traces=len(records),
        size=sum([record[4] for record in records]),
        heads=heads_text,
        records=text,
    )


def pack_steps(runs: Sequence[TraceSteps]) -> PackedBatch | None:
    """``runs`` as one row, their steps as they were recorded (content cut and masked), or
    ``None`` when they cannot all be: a start outside 1970-2554, a value orjson refuses (a
    lone surrogate, an integer past 64 bits). Those runs are then encoded one by one, which
    refuses only what it must (:func:`~.record.encode_steps`)."""
    if not runs:
        return None
    walls = [run[1] for run in runs]
    if not (math.isfinite(sum(walls)) and min(walls) >= 0.0 and max(walls) <= LATEST_TIME):
        return None
    plain = [run[:5] if run[2] is None and run[5] is None else plain_steps(run) for run in runs]
    try:
        data = orjson.dumps(plain)
    except orjson.JSONEncodeError:
        return None
    return PackedBatch(
        newest=max(walls), traces=len(runs), size=len(data), heads=STEPS, records=data
    )


def _unpack_steps(data: bytes) -> list[TraceRecord]:
    try:
        runs = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"a batch's runs are not JSON ({exc})") from exc
    if not isinstance(runs, list):
        raise ValueError("a batch's runs are not a list")
    try:
        return [encode_steps(trace_of_plain(run)) for run in runs]
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"a batch's run is not one recorded ({exc})") from exc


def unpack_batch(heads: object, records: object) -> list[TraceRecord]:
    """The records a row of ``jarvis_trace_batches`` holds, in the order they were saved;
    ``ValueError`` when the row is not one :func:`pack_batch` or :func:`pack_steps`
    wrote."""
    if heads == STEPS and isinstance(records, bytes):
        return _unpack_steps(records)
    if not isinstance(heads, str) or not isinstance(records, str):
        raise ValueError("a batch of traces is not text")
    try:
        items = orjson.loads(heads)
    except orjson.JSONDecodeError:
        try:
            items = json.loads(heads)  # written by the standard library
        except ValueError as exc:
            raise ValueError(f"a batch's heads are not JSON ({exc})") from exc
    texts = records.split("\n")
    if not isinstance(items, list) or len(items) != len(texts):
        raise ValueError("a batch's heads do not match its records")
    out: list[TraceRecord] = []
    for item, text in zip(items, texts, strict=True):
        if not isinstance(item, list) or len(item) != 5:
            raise ValueError("a batch's head is not [id, agent, start, failed, size]")
        trace_id, agent, start, failed, size = item
        if not (
            isinstance(trace_id, str)
            and isinstance(agent, str)
            and isinstance(start, int | float)
            and not isinstance(start, bool)
            and failed in (0, 1)
            and isinstance(size, int)
        ):
            raise ValueError("a batch's head is not [id, agent, start, failed, size]")
        out.append((trace_id, agent, float(start), int(failed), size, text))
    return out
