"""``jarvis ask --schema`` as a process against the scripted OpenAI-compatible engine, whose
request log shows the structured-output form jarvis sent and what each retry carried."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine


def jarvis(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def ask(engine: ScriptedEngine, *args: str) -> subprocess.CompletedProcess[str]:
    return jarvis("ask", "--base-url", engine.url, "-m", MODEL, "--no-keep", *args)


def test_the_short_form_prints_the_object_and_sends_a_strict_json_schema() -> None:
    with ScriptedEngine([Reply('{"name": "Ada", "age": 36}')]) as engine:
        done = ask(
            engine, "--schema", "name str, age int: in years", "Who wrote the first program?"
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Ada", "age": 36}
    [request] = engine.requests
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "description": "in years"},
                },
                "required": ["name", "age"],
                "additionalProperties": False,
            },
        },
    }


def test_an_invalid_answer_is_sent_back_and_the_second_one_printed(tmp_path: Path) -> None:
    schema = tmp_path / "person.json"
    schema.write_text(
        json.dumps(
            {
                "title": "Person",
                "type": "object",
                "properties": {"age": {"type": "integer", "minimum": 0}},
                "required": ["age"],
            }
        )
    )
    replies = [Reply('{"age": -3}'), Reply('{"age": 36}')]
    with ScriptedEngine(replies) as engine:
        done = ask(engine, "--schema", str(schema), "--json", "How old?")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["output"] == {"age": 36}
    assert data["usage"]["total_tokens"] == 24  # both attempts (12 tokens each)
    assert data["turns"] == 2
    retry = engine.messages(1)
    assert retry[-2] == {"role": "assistant", "content": '{"age": -3}'}
    assert "age: must be >= 0" in str(retry[-1]["content"])
    assert engine.requests[0]["response_format"]["json_schema"]["name"] == "Person"  # type: ignore[index]


def test_an_answer_that_never_matches_is_exit_code_5_with_the_details_on_verbose() -> None:
    with ScriptedEngine([Reply("Ada Lovelace, 36 years old")]) as engine:
        done = ask(engine, "--schema", '{"type": "object", "required": ["name"]}', "-v", "Who?")
        quiet = ask(engine, "--schema", "name", "--output-retries", "0", "Who?")
    assert done.returncode == 5, done.stderr
    assert done.stdout == ""
    assert "did not match the requested schema after 3 attempts" in done.stderr
    assert "the last of 3 replies:\nAda Lovelace, 36 years old\n" in done.stderr
    assert "- $: the reply is not JSON" in done.stderr
    assert "tokens of every attempt: 27+9" in done.stderr
    assert len(engine.requests) == 3 + 1  # 1 + 2 retries, then 1 with --output-retries 0
    assert quiet.returncode == 5
    assert "the last of" not in quiet.stderr


def test_a_schema_that_cannot_be_honoured_is_a_usage_error_before_any_request() -> None:
    cases = {
        '{"type": "array"}': "must describe a JSON object",
        '{"type": "object", "properties": {"a": {"$ref": "https://x"}}}': "refers outside",
        "{not json": "not valid JSON",
        "name strr": "unknown type 'strr'",
        "name str, name int": "given twice",
    }
    with ScriptedEngine() as engine:
        for schema, why in cases.items():
            done = ask(engine, "--schema", schema, "q")
            assert done.returncode == 2, (schema, done.stderr)
            assert why in done.stderr, (schema, done.stderr)
            assert "Traceback" not in done.stderr
    assert engine.requests == []
