"""The SQLite store's records (orjson) are the records the domain's JSON writer makes."""

from __future__ import annotations

import json

from contracts.trace_store_contract import make_trace
from jarvis.adapters.sqlite_traces.record import encode_trace
from jarvis.domain.traces import Span, Trace, trace_from_record, trace_to_record, trace_to_row


def _traces() -> list[Trace]:
    plain = make_trace("plain")
    remote = Trace(
        trace_id="remote",
        agent="orchestrator",
        start=1_796_187_731.1824653,
        duration=9.594600123818964e-05,
        status="cancelled",
        spans=(
            Span(
                span_id="0001",
                parent_id=None,
                kind="run",
                name="orchestrator",
                start=1_796_187_731.1824653,
                duration=1e-7,
                attributes={"first_token_seconds": 0.000123, "nested": {"a": [1, None, True]}},
            ),
        ),
        remote_trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        remote_parent_id="00f067aa0ba902b7",
    )
    return [plain, remote]


def test_a_record_is_the_domain_record_and_reads_back_exactly() -> None:
    for trace in _traces():
        trace_id, agent, start, failed, size, record = encode_trace(trace)
        assert (trace_id, agent, start, failed) == trace_to_row(trace)[:4]
        assert json.loads(record) == json.loads(trace_to_record(trace))
        assert list(json.loads(record)) == list(json.loads(trace_to_record(trace)))  # key order
        for ours, theirs in zip(
            json.loads(record)["spans"], json.loads(trace_to_record(trace))["spans"], strict=True
        ):
            assert list(ours) == list(theirs)  # the spans' keys too, in their order
        assert size == len(record.encode())
        assert trace_from_record(record) == trace


def test_what_orjson_refuses_is_written_by_the_standard_library() -> None:
    huge = Trace(
        trace_id="huge",
        agent="a",
        start=1.0,
        duration=1.0,
        status="ok",
        spans=(
            Span(
                span_id="0001",
                parent_id=None,
                kind="run",
                name="a",
                start=1.0,
                duration=1.0,
                attributes={"tokens_in": 2**70},
            ),
        ),
    )
    assert encode_trace(huge) == trace_to_row(huge)
    assert trace_from_record(encode_trace(huge)[5]) == huge
