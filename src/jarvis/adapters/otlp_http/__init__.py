"""Traces to an OpenTelemetry collector over OTLP/HTTP (JSON or protobuf): ``[otel]``."""

from jarvis.adapters.otlp_http.exporter import OtlpHttpExporter, traces_endpoint, traces_protocol

__all__ = ["OtlpHttpExporter", "traces_endpoint", "traces_protocol"]
