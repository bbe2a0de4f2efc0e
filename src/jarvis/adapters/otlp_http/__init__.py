"""Traces to an OpenTelemetry collector over OTLP/HTTP (JSON or protobuf): ``[otel]``.

The exporter (:mod:`.exporter`, which imports httpx) is imported by who sends traces; the
package itself names only where they go (:mod:`.endpoint`), which every run with traces on
asks.
"""

from jarvis.adapters.otlp_http.endpoint import traces_endpoint, traces_protocol

__all__ = ["traces_endpoint", "traces_protocol"]
