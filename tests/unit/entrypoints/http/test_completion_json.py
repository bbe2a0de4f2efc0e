"""The non-streamed ``chat.completion`` body written from a template is, byte for byte,
what ``JSONResponse`` writes for the same reply."""

from __future__ import annotations

import json
import time

import pytest
from starlette.responses import JSONResponse

from jarvis.domain.llm.completion import Usage
from jarvis.entrypoints.http.openai_routes import _completion, completion_json

CONTENTS = [
    "The capital of France is Paris.",
    "",
    'quotes " and \\ backslashes \\" and a trailing \\',
    "lines\nand\ttabs\rand \x00 \x1f \x7f controls",
    "unicode: é ß 中文 🙂 \u2028 \u2029 </script> \ufeff",
    '{"looks": ["like", "json"]}',
    "%s %d {} {0} %(name)s",
]


@pytest.mark.parametrize("content", CONTENTS)
@pytest.mark.parametrize("model", ["jarvis/simple", 'agent "x"\\y', "ünïcode-agent"])
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_the_template_writes_what_json_response_writes(
    content: str, model: str, finish: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_796_000_000.75)  # both read the clock
    usage = Usage(prompt_tokens=12, completion_tokens=345)
    reply_id = "chatcmpl-0123456789abcdef01234567"
    written = completion_json(reply_id, model, content, finish, usage)
    expected = JSONResponse(_completion(reply_id, model, content, (), finish, usage)).body
    assert written == expected
    assert json.loads(written)["choices"][0]["message"]["content"] == content
