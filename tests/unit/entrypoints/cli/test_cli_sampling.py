"""Which temperature a run uses, and ``--verbose`` saying so (the real embedded engine is
tried in ``tests/integration/test_cli_embedded_sampling.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jarvis.application.ask import ENGINE_SAMPLING, AskQuestion
from jarvis.entrypoints.cli import app
from jarvis.entrypoints.composition import Container
from jarvis.entrypoints.sdk import Jarvis
from jarvis.testing import ScriptedInference


def ask(engine: ScriptedInference, *args: str) -> Result:
    container = Container()
    container.inference.override(engine)
    result = CliRunner().invoke(app, ["ask", "--verbose", *args, "q"], obj=container)
    assert result.exit_code == 0, result.output
    return result


def sampling_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("sampling:")]


def test_the_embedded_engine_defaults_to_greedy_decoding() -> None:
    assert ENGINE_SAMPLING["llamacpp"].temperature == 0.0


def test_an_engine_named_llamacpp_gets_its_default() -> None:
    engine = ScriptedInference(["Paris."], engine_id="llamacpp")
    result = ask(engine)
    assert engine.requests[0].temperature == 0.0
    assert sampling_lines(result) == [
        "sampling: temperature 0 (the embedded engine's small model answers most accurately "
        "without sampling; --temperature or [agent] temperature overrides it)"
    ]


def test_other_engines_keep_the_agents_default() -> None:
    engine = ScriptedInference(["Paris."])
    result = ask(engine)
    assert engine.requests[0].temperature == 0.7
    assert sampling_lines(result) == ["sampling: temperature 0.7 (the default of the simple agent)"]


@pytest.mark.parametrize("engine_id", ["llamacpp", "scripted"])
def test_the_option_wins(engine_id: str) -> None:
    engine = ScriptedInference(["Paris."], engine_id=engine_id)
    result = ask(engine, "--temperature", "1.3")
    assert engine.requests[0].temperature == 1.3
    assert sampling_lines(result) == ["sampling: temperature 1.3 (set by --temperature)"]


def test_the_config_wins_over_the_engine(jarvis_home: Path) -> None:
    (jarvis_home / "config.toml").write_text("[agent]\ntemperature = 0.2\n", encoding="utf-8")
    engine = ScriptedInference(["Paris."], engine_id="llamacpp")
    result = ask(engine)
    assert engine.requests[0].temperature == 0.2
    assert sampling_lines(result) == ["sampling: temperature 0.2 (set by [agent] temperature)"]


def test_without_verbose_nothing_is_said() -> None:
    container = Container()
    container.inference.override(ScriptedInference(["Paris."], engine_id="llamacpp"))
    result = CliRunner().invoke(app, ["ask", "q"], obj=container)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_the_sdk_applies_the_engine_default_and_the_callers_value() -> None:
    engine = ScriptedInference(["a", "b"], engine_id="llamacpp")
    with Jarvis(inference=engine) as j:
        j.ask("q")
        j.ask("q", temperature=0.9)
    assert [r.temperature for r in engine.requests] == [0.0, 0.9]


async def test_the_service_reports_the_sampling_it_applies() -> None:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    runtime = bootstrap(load_config(), inference=ScriptedInference(engine_id="llamacpp"))
    service = await runtime.service()
    try:
        default = service.sampling(AskQuestion(question="q"))
        explicit = service.sampling(AskQuestion(question="q", temperature=0.5))
    finally:
        await runtime.aclose()
    assert (default.temperature, default.source) == (0.0, "engine")
    assert (explicit.temperature, explicit.source) == (0.5, "requested")
