"""How the container wires tracing: off by default (nothing records the runs), a run
recording and a writer when ``[traces]``, ``[telemetry]`` or an OTLP endpoint asks for one;
either way no event is built for it (no subscriber on the bus)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jarvis.application.config import JarvisConfig, OtelSettings, TelemetrySettings, TraceSettings
from jarvis.entrypoints.composition import bootstrap


@pytest.fixture(autouse=True)
def _no_otlp_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def test_tracing_is_off_by_default() -> None:
    container = bootstrap(JarvisConfig()).container
    assert container.trace_writer() is None
    assert container.bus().recording is None
    assert not container.bus().has_subscribers


@pytest.mark.parametrize(
    "config",
    [
        replace(JarvisConfig(), traces=TraceSettings(enabled=True)),
        replace(JarvisConfig(), telemetry=TelemetrySettings(enabled=True)),
        replace(JarvisConfig(), otel=OtelSettings(endpoint="http://127.0.0.1:9")),
    ],
)
def test_any_of_the_three_switches_records(config: JarvisConfig, jarvis_home: Path) -> None:
    container = bootstrap(config).container
    assert container.trace_writer() is not None
    assert container.bus().recording is not None
    assert not container.bus().has_subscribers  # recorded without events
    assert not (jarvis_home / "traces.db").exists()  # opened by the first write only


def test_the_standard_otlp_variable_turns_export_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert bootstrap(JarvisConfig()).container.trace_writer() is not None
