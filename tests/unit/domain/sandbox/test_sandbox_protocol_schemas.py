"""The committed JSON Schemas of the sandbox protocol match the pydantic models, and the
models refuse what a hostile container might send."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from jarvis.domain.sandbox.protocol import (
    CONTAINER_MESSAGE,
    HOST_MESSAGE,
    MAX_TEXT,
    InferenceAsk,
    RunMessage,
    ToolSpecModel,
    schemas,
)
from jarvis.domain.tools.specs import ToolSpec
from scripts.export_schemas import target

TARGET = target("sandbox")


def test_the_schemas_live_under_contracts() -> None:
    assert Path(__file__).resolve().parents[4] / "contracts" / "schemas" / "sandbox" == TARGET


def test_messages_are_told_apart_by_type_and_strings_are_bounded() -> None:
    for schema in schemas().values():
        assert '"maxLength"' in json.dumps(schema)
        assert schema["discriminator"]["propertyName"] == "type"  # type: ignore[index,call-overload]


def test_container_lines_are_read_by_their_type() -> None:
    line = json.dumps(
        {
            "type": "inference",
            "id": 1,
            "stream": True,
            "request": {
                "messages": [{"role": "user", "content": "hi"}],
                "model": "m",
                "temperature": 0.5,
                "max_tokens": 8,
            },
        }
    )
    message = CONTAINER_MESSAGE.validate_json(line)
    assert isinstance(message, InferenceAsk)
    assert message.request.value().messages[0].content == "hi"


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "result", "content": "x", "forged": true}',
        '{"type": "nonsense"}',
        '{"type": "inference", "id": 0, "request": {"messages": [], "model": "m", '
        '"temperature": 0, "max_tokens": 1}}',
        '{"type": "result", "content": "x", "turns": -1}',
        '{"type": "text", "text": "' + "a" * (MAX_TEXT + 1) + '"}',
        '{"type": "tool", "id": 1, "name": "' + "n" * 300 + '"}',
        '{"content": "no type"}',
        "not json",
    ],
)
def test_what_a_lying_container_sends_is_refused(line: str) -> None:
    with pytest.raises(ValidationError):
        CONTAINER_MESSAGE.validate_json(line)


def test_the_run_message_round_trips_and_carries_the_secrets() -> None:
    run = RunMessage(
        question="q", agent="simple", model="m", temperature=0.2, secrets={"TOKEN": "s3cret"}
    )
    assert HOST_MESSAGE.validate_json(run.model_dump_json()) == run


@pytest.mark.parametrize(("read_only", "destructive"), [(True, False), (False, True), (None, None)])
def test_host_tool_hints_survive_the_wire_into_the_container(
    read_only: bool | None, destructive: bool | None
) -> None:
    spec = ToolSpec(
        name="mcp__fs__delete",
        description="Delete a file.",
        side_effects=True,
        read_only_hint=read_only,
        destructive_hint=destructive,
    )
    run = RunMessage(
        question="q",
        agent="simple",
        model="m",
        temperature=0.2,
        host_tools=[ToolSpecModel.of(spec)],
    )
    received = HOST_MESSAGE.validate_json(run.model_dump_json())
    assert isinstance(received, RunMessage)
    assert [t.value() for t in received.host_tools] == [spec]


def test_a_tool_spec_from_an_older_host_without_hints_is_still_read() -> None:
    line = json.dumps({"name": "calculator", "description": "Compute."})
    spec = ToolSpecModel.model_validate_json(line).value()
    assert (spec.read_only_hint, spec.destructive_hint) == (None, None)
