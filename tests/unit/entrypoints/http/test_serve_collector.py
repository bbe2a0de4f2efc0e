"""The collector's pace is set in the processes ``jarvis serve`` owns, and only there."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from jarvis import Jarvis
from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli import serve_launch
from jarvis.entrypoints.http import server
from jarvis.entrypoints.http.collector import YOUNG_THRESHOLD, pace_for_serving
from jarvis.testing import ScriptedInference


@pytest.fixture(autouse=True)
def kept_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_pacing_for_serving_spaces_young_collections_only() -> None:
    pace_for_serving()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)


def test_serving_in_one_process_paces_it_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []
    monkeypatch.setattr(
        server._AnnouncingServer, "run", lambda self, sockets=None: seen.append(gc.get_threshold())
    )
    with pytest.raises(ConfigurationError):  # it never listened
        server.run(lambda scope, receive, send: None, host="127.0.0.1", port=0)  # type: ignore[arg-type,return-value]  # never called
    assert seen == [(YOUNG_THRESHOLD, 10, 10)]


def test_each_worker_paces_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(serve_launch.SPEC_VARIABLE, "{}")
    monkeypatch.delenv(serve_launch.SUPERVISOR_VARIABLE, raising=False)
    monkeypatch.setattr(serve_launch.ServeSpec, "from_json", staticmethod(lambda text: None))
    monkeypatch.setattr(serve_launch, "build_app", lambda spec: gc.get_threshold())
    assert serve_launch.app_from_environment() == (YOUNG_THRESHOLD, 10, 10)  # type: ignore[comparison-overlap]  # build_app stands in


def test_an_application_embedding_jarvis_keeps_its_collector(
    kept_thresholds: tuple[int, int, int],
) -> None:
    with Jarvis(inference=ScriptedInference(["fine"])) as jarvis:
        assert jarvis.ask("hi") == "fine"
    assert gc.get_threshold() == kept_thresholds
