"""The committed JSON Schemas of the REPL protocol match the pydantic models, and the
models read the lines the worker writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl.protocol import (
    HOST_MESSAGE,
    WORKER_MESSAGE,
    CallbackReply,
    ExecuteRequest,
    LlmBatchRequest,
    ResultMessage,
    schemas,
)
from scripts.export_schemas import target

TARGET = target("repl")


def test_every_message_requires_its_type() -> None:
    for schema in schemas().values():
        definitions = schema["$defs"]
        assert isinstance(definitions, dict)
        for definition in definitions.values():
            assert isinstance(definition, dict)
            properties = definition.get("properties")
            if isinstance(properties, dict) and "type" in properties:
                required = definition["required"]
                assert isinstance(required, list)
                assert "type" in required


def test_worker_lines_are_read_by_their_type() -> None:
    line = json.dumps({"type": "llm_batch", "id": 3, "prompts": ["a", "b"]})
    assert WORKER_MESSAGE.validate_json(line) == LlmBatchRequest(id=3, prompts=["a", "b"])
    result = {
        "type": "result",
        "id": 1,
        "stdout": "",
        "stderr": "",
        "value": "2",
        "error": None,
        "error_kind": None,
        "traceback": "",
        "final": None,
        "truncated": False,
        "duration_seconds": 0.001,
    }
    assert isinstance(WORKER_MESSAGE.validate_python(result), ResultMessage)


def test_unknown_fields_and_types_are_refused() -> None:
    with pytest.raises(ValueError, match="forged"):
        WORKER_MESSAGE.validate_json('{"type": "result", "forged": true}')
    with pytest.raises(ValueError, match="nonsense"):
        WORKER_MESSAGE.validate_json('{"type": "nonsense", "id": 1}')


def test_host_messages_round_trip() -> None:
    for message in (
        ExecuteRequest(id=1, code="print(1)"),
        CallbackReply(id=2, ok=True, value=["x", "y"]),
        CallbackReply(id=3, ok=False, error="boom"),
    ):
        assert HOST_MESSAGE.validate_json(message.model_dump_json()) == message


def test_the_schemas_live_under_contracts() -> None:
    assert Path(__file__).resolve().parents[4] / "contracts" / "schemas" / "repl" == TARGET
