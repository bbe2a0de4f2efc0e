"""The trace export contract on the in-memory fake and on OTLP/HTTP (a receiver started
by the test); where the OTLP endpoint comes from."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from contracts.trace_export_contract import TraceExportContract
from jarvis.adapters.otlp_http import traces_endpoint, traces_protocol
from jarvis.adapters.otlp_http.exporter import OtlpHttpExporter
from jarvis.testing.traces import InMemoryTraceExporter
from tests.support.otlp_receiver import OtlpReceiver


class TestInMemoryTraceExporter(TraceExportContract[InMemoryTraceExporter]):
    @pytest.fixture
    def exporter(self) -> InMemoryTraceExporter:
        return InMemoryTraceExporter()

    @pytest.fixture
    def broken(self) -> InMemoryTraceExporter:
        exporter = InMemoryTraceExporter()
        exporter.broken = True
        return exporter

    def received(self, exporter: InMemoryTraceExporter) -> tuple[list[str], int]:
        return [s.name for t in exporter.exported for s in t.spans], exporter.calls


class TestOtlpHttpExporter(TraceExportContract[OtlpHttpExporter]):
    @pytest.fixture
    def receiver(self) -> Iterator[OtlpReceiver]:
        with OtlpReceiver() as receiver:
            yield receiver

    @pytest.fixture
    def exporter(self, receiver: OtlpReceiver) -> Iterator[OtlpHttpExporter]:
        exporter = OtlpHttpExporter(traces_endpoint(receiver.endpoint, {}))
        self._receiver = receiver
        yield exporter
        exporter.close()

    @pytest.fixture
    def broken(self) -> OtlpHttpExporter:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return OtlpHttpExporter(f"http://127.0.0.1:{port}/v1/traces", timeout=2.0)

    def received(self, exporter: OtlpHttpExporter) -> tuple[list[str], int]:
        names = [str(s["name"]).split(" ", 1)[1] for s in self._receiver.spans()]
        return names, len(self._receiver.requests)


def test_a_refusing_receiver_is_an_error() -> None:
    from contracts.trace_store_contract import make_trace
    from jarvis.domain.traces import TraceStoreError

    with OtlpReceiver(status=503) as receiver:
        exporter = OtlpHttpExporter(traces_endpoint(receiver.endpoint, {}))
        with pytest.raises(TraceStoreError, match="HTTP 503"):
            exporter.export([make_trace("d" * 32)])
        exporter.close()
    assert receiver.paths == ["/v1/traces"]
    assert receiver.content_types == ["application/json"]


def test_the_endpoint_comes_from_the_config_then_the_standard_variables() -> None:
    assert traces_endpoint("", {}) == ""
    assert traces_endpoint("http://c:4318", {}) == "http://c:4318/v1/traces"
    assert traces_endpoint("http://c:4318/v1/traces", {}) == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:4318/"}
    assert traces_endpoint("", env) == "http://e:4318/v1/traces"
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://t:9/custom"
    assert traces_endpoint("", env) == "http://t:9/custom"
    assert traces_endpoint("http://c:4318", env) == "http://c:4318/v1/traces"


class TestOtlpProtobufExporter(TestOtlpHttpExporter):
    """The same contract in OTLP's protobuf encoding (the ``otel`` extra)."""

    @pytest.fixture
    def exporter(self, receiver: OtlpReceiver) -> Iterator[OtlpHttpExporter]:
        url = traces_endpoint(receiver.endpoint, {})
        exporter = OtlpHttpExporter(url, protocol="http/protobuf")
        self._receiver = receiver
        yield exporter
        exporter.close()
        assert set(receiver.content_types) <= {"application/x-protobuf"}


def test_the_protocol_comes_from_the_config_then_the_standard_variables() -> None:
    assert traces_protocol("", {}) == "http/json"
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    assert traces_protocol("", env) == "http/protobuf"
    assert traces_protocol("http/json", env) == "http/json"
    env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "grpc"  # not served: JSON over HTTP
    assert traces_protocol("", env) == "http/json"
    assert traces_protocol("http/protobuf", {}) == "http/protobuf"


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_a_lone_surrogate_is_sent_as_a_replacement_character(protocol: str) -> None:
    """Neither encoding carries a lone surrogate as text (protobuf refuses the whole batch,
    strict JSON readers the request): it is sent as U+FFFD, with the rest of the batch."""
    from dataclasses import replace

    from contracts.trace_store_contract import make_trace

    trace = make_trace("e" * 32)
    run, inference = trace.spans
    odd = replace(trace, spans=(run, replace(inference, name="m\ud800")))
    with OtlpReceiver() as receiver:
        exporter = OtlpHttpExporter(traces_endpoint(receiver.endpoint, {}), protocol=protocol)
        assert exporter.export([make_trace("a" * 32, agent="one"), odd]) == []
        exporter.close()
    assert len(receiver.requests) == 1
    assert [s["name"] for s in receiver.spans()] == [
        "invoke_agent one",
        "chat m",
        "invoke_agent simple",
        "chat m\ufffd",
    ]
