"""Traces: the store ``jarvis traces`` reads, the writer that saves (and exports) each run's
trace off the event loop, and the event bus whose runs are recorded."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis.application.config import JarvisConfig
from jarvis.domain.ports import TraceExportPort, TraceStorePort
from jarvis.domain.run.events import EventBus
from jarvis.domain.url_masks import redact_urls
from jarvis.entrypoints.settings import config_dir

if TYPE_CHECKING:
    from jarvis.application.trace_writer import TraceWriter


def trace_store(config: JarvisConfig) -> TraceStorePort:
    """The SQLite trace store (``[traces] db_path``), opened on its first use."""
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.entrypoints.composition.stores import file_notice

    path = config_dir() / Path(config.traces.db_path or "traces.db").expanduser()
    return SqliteTraceStore(path, notice=file_notice)


def _trace_notice(message: str) -> None:
    """One line on stderr, URL credentials masked (the trace writer tells it once)."""
    with contextlib.suppress(Exception):
        sys.stderr.write(f"jarvis: {redact_urls(message)}\n")
        sys.stderr.flush()


def _otlp_url(config: JarvisConfig) -> str:
    from jarvis.adapters.otlp_http import traces_endpoint

    return traces_endpoint(config.otel.endpoint, os.environ)


def trace_writer(config: JarvisConfig) -> TraceWriter | None:
    """Saves traces off the event loop when ``[traces]`` or ``[telemetry]`` is enabled, and
    exports them when an OTLP endpoint is set."""
    keep = config.traces.enabled or config.telemetry.enabled
    url = _otlp_url(config)
    if not (keep or url):
        return None
    from jarvis.application.trace_writer import TraceWriter

    def exporter() -> TraceExportPort:
        from jarvis.entrypoints.composition.skip_optional_imports import import_httpx

        import_httpx()  # without its command-line client (see the function)
        from jarvis.adapters.otlp_http import traces_protocol
        from jarvis.adapters.otlp_http.exporter import OtlpHttpExporter

        protocol = traces_protocol(config.otel.protocol, os.environ)
        return OtlpHttpExporter(url, timeout=config.otel.timeout, protocol=protocol)

    return TraceWriter(
        (lambda: trace_store(config)) if keep else None,
        notice=_trace_notice,
        max_days=config.traces.max_days,
        max_bytes=int(config.traces.max_mb * 1_000_000),
        exporter=exporter if url else None,
    )


def event_bus(config: JarvisConfig, writer: TraceWriter | None) -> EventBus:
    """The bus of every run; the trace recorder listens to it when traces are on."""
    bus = EventBus()
    if writer is not None:
        from jarvis.application.traces import run_recording

        content = config.traces.enabled and config.traces.content
        bus.record_with(
            run_recording(
                writer.hand_over, content=content, mask=redact_urls, on_first=writer.start
            )
        )
    return bus
