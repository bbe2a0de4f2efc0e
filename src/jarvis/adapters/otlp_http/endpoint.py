"""Where traces go and how they are encoded: ``[otel]`` and the standard
``OTEL_EXPORTER_OTLP_*`` variables. Apart from the exporter because every run with traces
on asks it, and it needs no HTTP client: ``jarvis ask`` imports none for it.
"""

from __future__ import annotations

from collections.abc import Mapping


def traces_endpoint(endpoint: str, env: Mapping[str, str]) -> str:
    """The URL traces go to: ``[otel] endpoint``, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    (used as is), else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``; empty: none."""
    base = endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    if not endpoint and env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    if not base:
        return ""
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def traces_protocol(protocol: str, env: Mapping[str, str]) -> str:
    """``http/json`` or ``http/protobuf``: ``[otel] protocol``, else
    ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else
    ``http/json`` (any other value, ``grpc`` included, is ``http/json`` too)."""
    chosen = (
        protocol
        or env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    return "http/protobuf" if chosen.strip() == "http/protobuf" else "http/json"
