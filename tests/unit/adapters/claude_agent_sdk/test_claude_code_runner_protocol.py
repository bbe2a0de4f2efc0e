"""The claude_code runner protocol on the Python side: the committed JSON Schemas match the
models, and the reader of the runner's stdout is bounded and survives hostile output."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema_rs

from jarvis.adapters.claude_agent_sdk.wire import (
    END,
    START,
    LineSplitter,
    OutputReader,
    RunnerRequest,
    SessionEvent,
    TextDeltaEvent,
    ToolResultEvent,
    ToolUseEvent,
)
from scripts.export_schemas import target

TARGET = target("claude_code_runner")


def test_the_schemas_live_under_contracts() -> None:
    root = Path(__file__).resolve().parents[4]
    assert root / "contracts" / "schemas" / "claude_code_runner" == TARGET


def _validator(name: str) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(json.loads((TARGET / name).read_text(encoding="utf-8")))


def _request(**fields: object) -> RunnerRequest:
    base: dict[str, object] = {
        "prompt": "hi",
        "api_key": "k",
        "base_url": "http://127.0.0.1:1",
        "workspace": "/tmp",
        "allowed_tools": ["Write"],
        "system_prompt": "",
        "session_id": "",
        "model": "m",
        "max_turns": 3,
        "permission_mode": "acceptEdits",
        "config_dir": "/tmp/c",
        "mcp_servers": {},
    }
    base.update(fields)
    return RunnerRequest.model_validate(base)


def test_what_the_adapter_sends_validates_and_a_missing_field_does_not() -> None:
    validator = _validator("request.schema.json")
    sent = json.loads(_request().model_dump_json())
    assert validator.is_valid(sent)
    for field in sent:
        assert not validator.is_valid({k: v for k, v in sent.items() if k != field}), field
    assert not validator.is_valid({**sent, "permission_mode": "yolo"})
    assert not validator.is_valid({**sent, "max_turns": 0})
    assert not validator.is_valid({**sent, "session_id": "../../etc/passwd"})


def test_the_runner_lines_validate_against_the_committed_schemas() -> None:
    events = _validator("event.schema.json")
    response = _validator("response.schema.json")
    assert events.is_valid({"type": "session", "session_id": "s"})
    assert events.is_valid({"type": "tool_use", "id": "t", "name": "Write", "input": {"a": 1}})
    assert not events.is_valid({"type": "tool_result", "tool_use_id": "t"})
    assert not events.is_valid({"type": "nope"})
    block = {
        "content": "x",
        "session_id": "s",
        "num_turns": 1,
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "tool_results": [],
        "is_error": False,
        "subtype": "success",
        "error": "",
    }
    assert response.is_valid(block)
    assert not response.is_valid({k: v for k, v in block.items() if k != "session_id"})


# --- the line splitter ----------------------------------------------------------------------


def test_lines_split_across_chunks_and_the_last_unterminated_line_is_kept() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert splitter.finish() == [b"f"]


def test_an_overlong_line_is_dropped_whole_never_half_parsed() -> None:
    splitter = LineSplitter(10)
    out = splitter.feed(b"short\n" + b"x" * 25)
    out += splitter.feed(b'y"}\n{"ok":1}\n')
    assert out == [b"short", b'{"ok":1}']
    assert splitter.dropped == 1


def test_splitting_is_linear_in_the_input() -> None:
    data = (b"z" * 1000 + b"\n") * 4000 + b"w" * 5_000_000
    splitter = LineSplitter(1_000_000)
    started = time.perf_counter()
    lines = 0
    for index in range(0, len(data), 4096):
        lines += len(splitter.feed(data[index : index + 4096]))
    assert splitter.finish() == []
    assert lines == 4000
    assert time.perf_counter() - started < 5.0


# --- the output reader ----------------------------------------------------------------------


def _block(**fields: object) -> bytes:
    base: dict[str, object] = {
        "content": "Done.",
        "session_id": "abc-1",
        "num_turns": 2,
        "usage": {"input_tokens": 10, "output_tokens": 4},
        "tool_results": [],
        "is_error": False,
        "subtype": "success",
        "error": "",
    }
    base.update(fields)
    return json.dumps(base).encode()


def test_events_then_the_final_block() -> None:
    reader = OutputReader()
    lines = [
        b'{"type":"session","session_id":"abc-1"}',
        b'{"type":"text_delta","text":"Do"}',
        b'{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/w/a"}}',
        b'{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}',
        START.encode(),
        _block(),
        END.encode(),
        b'{"type":"text_delta","text":"after the end: ignored"}',
    ]
    events = [reader.feed(line) for line in lines]
    assert [type(e) for e in events] == [
        SessionEvent,
        TextDeltaEvent,
        ToolUseEvent,
        ToolResultEvent,
        type(None),
        type(None),
        type(None),
        type(None),
    ]
    assert reader.ended
    assert reader.response is not None
    assert reader.response.content == "Done."
    assert reader.response.usage.input_tokens == 10


def test_malformed_and_foreign_lines_are_skipped_not_fatal() -> None:
    reader = OutputReader()
    for line in [
        b"(node:12) ExperimentalWarning: something",
        b"{not json",
        b'{"type":"text_delta"}',
        b'{"type":"unknown","x":1}',
        b'{"type":"text_delta","text":5}',
        b"[1,2]",
    ]:
        assert reader.feed(line) is None
    assert reader.malformed == 4
    assert reader.feed(b'{"type":"text_delta","text":"ok","extra":"ignored"}') is not None


def test_a_missing_or_broken_block_is_reported() -> None:
    missing = OutputReader()
    missing.feed(b'{"type":"text_delta","text":"x"}')
    assert missing.response is None
    assert not missing.ended
    broken = OutputReader()
    for line in (START.encode(), b'{"content": 1}', END.encode()):
        broken.feed(line)
    assert broken.response is None
    assert "malformed" in broken.block_error
    two = OutputReader()
    for line in (START.encode(), _block(), _block(), END.encode()):
        two.feed(line)
    assert two.response is None
    assert "2 lines" in two.block_error
    unterminated = OutputReader()
    for line in (START.encode(), _block()):
        unterminated.feed(line)
    assert unterminated.response is None
