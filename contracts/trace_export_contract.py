"""The behaviour every TraceExportPort implementation shows (fake and real alike)."""

from __future__ import annotations

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

    def test_nothing_is_sent_for_no_traces(self, exporter: ExporterT) -> None:
        exporter.export([])
        assert self.received(exporter) == ([], 0)

    def test_a_receiver_that_is_down_is_a_trace_store_error(self, broken: ExporterT) -> None:
        with pytest.raises(TraceStoreError):
            broken.export([make_trace("c" * 32)])
