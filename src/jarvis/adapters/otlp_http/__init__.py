"""Traces to an OpenTelemetry collector over OTLP/HTTP (JSON encoding): ``[otel] endpoint``."""

from jarvis.adapters.otlp_http.exporter import OtlpHttpExporter, traces_endpoint

__all__ = ["OtlpHttpExporter", "traces_endpoint"]
