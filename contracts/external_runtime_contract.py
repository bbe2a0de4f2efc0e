"""The behaviour every ExternalRuntimePort implementation shows (the opencode adapter and
the in-memory test double alike).

A subclass provides two fixtures: ``runtime`` (a fresh runtime, closed by the fixture) and
``run_request`` (a factory ``run_request(prompt, workspace, **fields) -> ExternalRunRequest`` for a
runtime whose engine answers every prompt with the same text, ``expected_answer``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.external_runtime import (
    ExternalEvent,
    ExternalRunDone,
    ExternalRunRequest,
    ExternalRuntimePort,
    ExternalTextDelta,
)

RequestFactory = Callable[..., ExternalRunRequest]


def request_factory(*, model: str, base_url: str = "", **defaults: object) -> RequestFactory:
    """A ``run_request`` factory: requests for ``model`` at ``base_url`` with ``defaults``
    (e.g. ``timeout``, ``engine``), each overridable per request."""

    def make(prompt: str, workspace: str, **fields: object) -> ExternalRunRequest:
        return ExternalRunRequest(
            prompt=prompt,
            workspace=workspace,
            model=model,
            base_url=base_url,
            **(defaults | fields),  # type: ignore[arg-type]
        )

    return make


async def collect(runtime: ExternalRuntimePort, request: ExternalRunRequest) -> list[ExternalEvent]:
    return [event async for event in runtime.run(request)]


def done(events: list[ExternalEvent]) -> ExternalRunDone:
    assert events, "a run reports at least its result"
    last = events[-1]
    assert isinstance(last, ExternalRunDone), "the last event is the result"
    assert not any(isinstance(e, ExternalRunDone) for e in events[:-1])
    return last


class ExternalRuntimeContract:
    expected_answer: str = "Done."

    async def test_a_run_streams_its_answer_and_ends_with_it(
        self, runtime: ExternalRuntimePort, run_request: RequestFactory, tmp_path: Path
    ) -> None:
        events = await collect(runtime, run_request("say it", str(tmp_path)))
        result = done(events)
        streamed = "".join(e.text for e in events if isinstance(e, ExternalTextDelta))
        assert result.content == self.expected_answer
        assert streamed == result.content
        assert result.session_id
        assert result.turns >= 1

    async def test_a_second_run_continues_the_workspace_session(
        self, runtime: ExternalRuntimePort, run_request: RequestFactory, tmp_path: Path
    ) -> None:
        first = done(await collect(runtime, run_request("one", str(tmp_path))))
        second = done(await collect(runtime, run_request("two", str(tmp_path))))
        assert second.session_id == first.session_id

    async def test_new_session_and_named_session(
        self, runtime: ExternalRuntimePort, run_request: RequestFactory, tmp_path: Path
    ) -> None:
        first = done(await collect(runtime, run_request("one", str(tmp_path))))
        fresh = done(await collect(runtime, run_request("two", str(tmp_path), new_session=True)))
        assert fresh.session_id != first.session_id
        named = done(
            await collect(runtime, run_request("three", str(tmp_path), session_id=first.session_id))
        )
        assert named.session_id == first.session_id

    async def test_an_unknown_session_is_refused(
        self, runtime: ExternalRuntimePort, run_request: RequestFactory, tmp_path: Path
    ) -> None:
        with pytest.raises(ConfigurationError):
            await collect(runtime, run_request("x", str(tmp_path), session_id="ses_nosuchsession"))

    async def test_aclose_is_idempotent(self, runtime: ExternalRuntimePort) -> None:
        await runtime.aclose()
        await runtime.aclose()
