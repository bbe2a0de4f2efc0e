"""The quick constructor of the frozen dataclasses made on every run: the same instances,
signature, defaults and immutability as the dataclass's own ``__init__``; anything it cannot
make is refused when the class is made."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

from jarvis.domain.llm.completion import Usage
from jarvis.domain.quick_init import quick_init
from jarvis.domain.run.events import AgentRunStarted, InferenceEnded, ToolCallStarted
from jarvis.domain.traces import Span, Trace


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plain:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)


def test_it_makes_what_the_dataclass_makes() -> None:
    @quick_init
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Quick:
        name: str
        count: int = 3
        tags: list[str] = field(default_factory=list)

    quick, plain = Quick(name="a"), _Plain(name="a")
    assert (quick.name, quick.count, quick.tags) == (plain.name, plain.count, plain.tags)
    assert Quick(name="a").tags is not quick.tags  # a fresh default for each
    assert Quick(name="b", count=1, tags=["x"]) == Quick(name="b", count=1, tags=["x"])
    assert repr(Quick(name="b")).endswith("Quick(name='b', count=3, tags=[])")
    assert (
        str(inspect.signature(Quick))
        == "(*, name: 'str', count: 'int' = 3, tags: 'list[str]' = <factory>) -> None"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.name = "b"  # type: ignore[misc]  # what is checked: it is refused
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]  # what is checked: a missing field is refused
    with pytest.raises(TypeError):
        Quick("a")  # type: ignore[call-arg]  # what is checked: fields are keywords only


def test_events_and_spans_are_unchanged_from_the_outside() -> None:
    usage = Usage(prompt_tokens=1, completion_tokens=2)
    ended = InferenceEnded(engine="e", model="m", usage=usage, finish_reason="stop", at=5.0)
    assert dataclasses.asdict(ended)["usage"] == {"prompt_tokens": 1, "completion_tokens": 2}
    assert ended == pickle.loads(pickle.dumps(ended))
    assert dataclasses.replace(ended, model="n").model == "n"
    assert (ended.type, ended.tool_calls) == ("inference_end", ())
    started = AgentRunStarted(agent="a", input="q")
    assert started.at > 0
    assert started.type == "agent_run_start"
    call = ToolCallStarted(tool="t", call_id="c", arguments={})
    assert call.agent == ""
    span = Span(span_id="1", parent_id=None, kind="run", name="n", start=1.0, duration=0.5)
    assert (span.ok, span.attributes, span.content) == (True, {}, {})
    trace = Trace(trace_id="t", agent="a", start=1.0, duration=0.5, status="ok", spans=(span,))
    assert (trace.error, trace.remote_trace_id) == ("", "")
    assert hash(trace.status) == hash("ok")


def test_what_it_cannot_make_is_refused_when_the_class_is_made() -> None:
    @dataclass(frozen=True, kw_only=True)
    class NoSlots:
        name: str

    @dataclass(frozen=True, slots=True)
    class Positional:
        name: str

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Checked:
        name: str

        def __post_init__(self) -> None: ...

    for cls in (NoSlots, Positional, Checked):
        with pytest.raises(TypeError):
            quick_init(cls)
