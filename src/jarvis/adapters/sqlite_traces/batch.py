"""A batch of traces as the SQLite store writes it: one row for the whole batch.

The trace writer hands the store a few hundred records at once; inserting them one row at
a time (two indexes and a size trigger each) cost 4-6 µs of CPU a trace, the larger part of
what recording a tool run adds. One row holding the batch costs 1.4-1.8 µs: the records are
joined by line breaks (JSON text holds none: its strings escape them), so none is encoded
twice, and their heads (id, agent, start, failed, size) are one JSON array beside them. The
store expands a batch into rows when it is first read (:mod:`.store`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import NamedTuple

import orjson

from jarvis.domain.traces import TraceRecord


class PackedBatch(NamedTuple):
    """A row of ``jarvis_trace_batches``: ``newest`` is the latest start of its traces
    (pruning by age drops the batch once it is older), ``size`` the sum of their sizes."""

    newest: float
    traces: int
    size: int
    heads: str
    records: str


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


def unpack_batch(heads: object, records: object) -> list[TraceRecord]:
    """The records a row of ``jarvis_trace_batches`` holds, in the order they were saved;
    ``ValueError`` when the row is not one :func:`pack_batch` wrote."""
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
