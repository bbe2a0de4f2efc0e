"""The domain's value objects keep one canonical shape."""

from __future__ import annotations

import dataclasses

import pytest

from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message, Role, ToolCall


class TestToolCallFromJsonText:
    def test_object_arguments_are_parsed(self) -> None:
        call = ToolCall.from_json_text(id="c1", name="calc", text='{"expression": "2+2"}')
        assert call.arguments == {"expression": "2+2"}
        assert call.parsed
        assert call.raw_arguments is None

    @pytest.mark.parametrize("text", [None, "", "   "])
    def test_empty_text_means_no_arguments(self, text: str | None) -> None:
        call = ToolCall.from_json_text(id="c1", name="calc", text=text)
        assert call.arguments == {}
        assert call.parsed

    @pytest.mark.parametrize("text", ['{"a": ', "[1, 2]", '"just a string"', "42", "{'a': 1}"])
    def test_text_that_is_not_a_json_object_is_kept_raw(self, text: str) -> None:
        call = ToolCall.from_json_text(id="c1", name="calc", text=text)
        assert not call.parsed
        assert call.arguments == {}
        assert call.raw_arguments == text
        assert call.arguments_json() == text

    def test_arguments_render_as_compact_json(self) -> None:
        call = ToolCall(id="c", name="n", arguments={"b": 1, "a": "é"})
        assert call.arguments_json() == '{"b":1,"a":"é"}'


def test_usage_adds_up() -> None:
    first = Usage(prompt_tokens=3, completion_tokens=4)
    total = first + Usage(prompt_tokens=1, completion_tokens=2)
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (4, 6, 10)


def test_messages_are_frozen() -> None:
    message = Message.user("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]
    assert message.role is Role.USER
