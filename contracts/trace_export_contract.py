"""The behaviour every TraceExportPort implementation shows (fake and real alike)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Generic, TypeVar

import pytest

from contracts.trace_store_contract import make_trace
from jarvis.domain.ports import TraceExportPort
from jarvis.domain.traces import TraceStoreError

ExporterT = TypeVar("ExporterT", bound=TraceExportPort)


class TraceExportContract(Generic[ExporterT]):
    """Subclass with fixtures ``exporter`` (a working one), ``broken`` (one whose receiver
    is down) and a method ``received(exporter)``: the names of the spans received, in order,
    and the number of requests."""

    @pytest.fixture
    def exporter(self) -> ExporterT:
        raise NotImplementedError

    @pytest.fixture
    def broken(self) -> ExporterT:
        raise NotImplementedError

    def received(self, exporter: ExporterT) -> tuple[list[str], int]:
        raise NotImplementedError

    def test_a_batch_is_received_whole_in_one_request(self, exporter: ExporterT) -> None:
        exporter.export([make_trace("a" * 32, agent="one"), make_trace("b" * 32, agent="two")])
        names, requests = self.received(exporter)
        assert requests == 1
        assert names == ["one", "m", "two", "m"]

    @pytest.mark.parametrize(
        ("start", "duration", "why"),
        [
            (1000.0, math.nan, "not a finite number"),
            (-1.0, 1.5, "outside 1970-2554"),  # OTLP's times are unsigned
            (10.0, -100.0, "outside 1970-2554"),  # so is its end
            (2e10, -1e10, "outside 1970-2554"),  # a start past 2554 that ends before
            (2e10, 1.5, "outside 1970-2554"),  # past 2**64 nanoseconds
            (1e300, 1.5, "outside 1970-2554"),
        ],
    )
    def test_a_trace_that_cannot_be_sent_is_left_out_alone(
        self, exporter: ExporterT, start: float, duration: float, why: str
    ) -> None:
        """Times no span can carry cost that trace, not its batch."""
        bad = make_trace("e" * 32, agent="bad")
        run = replace(bad.spans[0], start=start, duration=duration)
        bad = replace(bad, spans=(run, *bad.spans[1:]))
        left_out = exporter.export(
            [make_trace("a" * 32, agent="one"), bad, make_trace("b" * 32, agent="two")]
        )
        assert self.received(exporter) == (["one", "m", "two", "m"], 1)
        assert len(left_out) == 1
        assert "e" * 32 in left_out[0]
        assert why in left_out[0]

    def test_a_batch_of_traces_that_cannot_be_sent_sends_nothing(self, exporter: ExporterT) -> None:
        bad = replace(make_trace("f" * 32), start=math.inf)
        assert len(exporter.export([bad])) == 1
        assert self.received(exporter) == ([], 0)

    def test_a_value_that_is_not_a_finite_number_does_not_cost_the_batch(
        self, exporter: ExporterT
    ) -> None:
        """A ``NaN`` among a span's values is sent as OTLP writes it (no JSON number can
        hold it): the batch is received whole."""
        trace = make_trace("a" * 32, agent="one")
        inference = replace(trace.spans[1], attributes={"score": math.nan})
        assert exporter.export([replace(trace, spans=(trace.spans[0], inference))]) == []
        assert self.received(exporter) == (["one", "m"], 1)

    def test_nothing_is_sent_for_no_traces(self, exporter: ExporterT) -> None:
        exporter.export([])
        assert self.received(exporter) == ([], 0)

    def test_a_receiver_that_is_down_is_a_trace_store_error(self, broken: ExporterT) -> None:
        with pytest.raises(TraceStoreError):
            broken.export([make_trace("c" * 32)])
