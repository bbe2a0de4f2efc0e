"""A record of steps is read back as the trace its run made, and a damaged one (a hostile or
broken ``traces.db``) is refused with ``ValueError``, never another exception: ``jarvis
traces`` shows it as damaged and goes on."""

from __future__ import annotations

import contextlib
import json
import random

import pytest

from contracts.trace_store_contract import recorded_steps
from jarvis.domain.trace_steps import read_trace, steps_to_row, trace_of_log


def test_a_record_of_steps_reads_back_as_its_trace() -> None:
    trace = recorded_steps(content=True)
    assert read_trace(steps_to_row(trace)[5]) == trace_of_log(trace)


def _record(**changes: object) -> str:
    data = json.loads(steps_to_row(recorded_steps())[5])
    data.update(changes)
    return json.dumps(data)


def _steps(*steps: list[object]) -> str:
    return _record(steps=list(steps))


@pytest.mark.parametrize(
    "record",
    [
        _record(steps=[]),
        _record(steps="no"),
        _record(wall="1"),
        _record(wall=1e300),
        _record(trace_id=5),
        _record(dropped=True),
        _steps([2, 1.0, -1, "e", "m"]),  # the first step is not a run
        _steps([0, 1.0, 3, "a", None]),  # the run hangs under something
        _steps([0, 1.0, -1, "a", None], [2, 2.0, 5, "e", "m"]),  # a parent after it
        _steps([0, 1.0, -1, "a", None], [2, 2.0, -1, "e", "m"]),  # a second root
        _steps([0, 1.0, -1, "a", None], [9, 2.0, 0]),  # no such kind
        _steps([0, 1.0, -1, "a", None], [1, 2.0, 4, 1, "stop", ""]),  # ends nothing
        _steps([0, 1.0, -1, "a", None], [1, 2.0, 0, 1, "stop", ""], [1, 3.0, 0, 1, "stop", ""]),
        _steps([0, "1.0", -1, "a", None]),
        _steps([0, 1.0, -1, 7, None]),
        _steps([0, 1.0, -1, "a"]),
        _steps([0, 1.0, -1, "a", None], [2, 2.0, 0, "e", "m"], [3, 3.0, 1, "x", 1, "s", 0, None]),
        _record(wall=-5.0),  # before 1970
        '{"v": 2, "steps": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_a_damaged_record_is_refused(record: str) -> None:
    with pytest.raises(ValueError, match=r"\w"):  # any reason, said in words
        read_trace(record)


def _mutated(value: object, chance: random.Random) -> object:
    if isinstance(value, list) and value and chance.random() < 0.7:
        at = chance.randrange(len(value))
        value = [*value]
        value[at] = _mutated(value[at], chance)
        return value
    return chance.choice([None, True, -1, 0, 1, 2, 10**30, 1.5, -1e308, "", "x", [], {}, [0]])


def test_no_mutation_of_a_record_raises_anything_but_value_error() -> None:
    chance = random.Random(22)
    data = json.loads(steps_to_row(recorded_steps(content=True))[5])
    for _ in range(3000):
        mutated = dict(data)
        key = chance.choice(list(mutated))
        mutated[key] = _mutated(mutated[key], chance)
        with contextlib.suppress(ValueError):
            read_trace(json.dumps(mutated))
