"""The committed JSON Schemas of the sandbox protocol match the pydantic models, and the
models refuse what a hostile container might send."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from jarvis.domain.sandbox_protocol import (
    CONTAINER_MESSAGE,
    HOST_MESSAGE,
    MAX_TEXT,
    InferenceAsk,
    RunMessage,
    schemas,
)
from scripts.export_schemas import target

TARGET = target("sandbox")


def test_the_schemas_live_under_contracts() -> None:
    assert Path(__file__).resolve().parents[2] / "contracts" / "schemas" / "sandbox" == TARGET


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
