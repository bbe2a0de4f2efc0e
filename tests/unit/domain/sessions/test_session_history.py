"""Trimming replayed history: oldest first, bounded, never splitting a tool exchange."""

from __future__ import annotations

import pytest

from jarvis.domain.llm.messages import Message, Role, ToolCall
from jarvis.domain.sessions.history import estimate_tokens, replay_units, trim_history


def _exchange(n: int) -> list[Message]:
    """A user turn answered through two tool calls."""
    calls = (ToolCall(id=f"a{n}", name="calculator"), ToolCall(id=f"b{n}", name="think"))
    return [
        Message.user(f"q{n}"),
        Message.assistant("", calls),
        Message.tool("1", tool_call_id=f"b{n}", name="think"),
        Message.tool("2", tool_call_id=f"a{n}", name="calculator"),
        Message.assistant(f"answer {n}"),
    ]


def _valid(messages: tuple[Message, ...]) -> bool:
    """Every tool call answered right after it, every tool result preceded by its call."""
    units, unusable = replay_units(messages)
    return unusable == 0 and sum(map(len, units)) == len(messages)


def test_no_bound_keeps_everything() -> None:
    history = _exchange(1) + _exchange(2)
    trimmed = trim_history(history)
    assert trimmed.messages == tuple(history)
    assert (trimmed.dropped, trimmed.incomplete) == (0, 0)


@pytest.mark.parametrize("max_messages", range(12))
def test_a_message_bound_never_splits_a_call_from_its_result(max_messages: int) -> None:
    history = _exchange(1) + _exchange(2)
    trimmed = trim_history(history, max_messages=max_messages)
    assert len(trimmed.messages) <= max_messages
    assert _valid(trimmed.messages)
    assert tuple(history[len(history) - len(trimmed.messages) :]) == trimmed.messages
    assert not trimmed.messages or trimmed.messages[0].role is Role.USER
    assert trimmed.dropped == len(history) - len(trimmed.messages)


def test_a_message_bound_drops_the_oldest_turns() -> None:
    history = _exchange(1) + _exchange(2) + _exchange(3)
    assert trim_history(history, max_messages=10).messages == tuple(_exchange(2) + _exchange(3))
    # 7 fits the last exchange (5) but not the tool unit before it: start on q3
    assert trim_history(history, max_messages=7).messages == tuple(_exchange(3))


def test_a_token_bound_counts_with_the_given_counter() -> None:
    history = [Message.user("a" * 400), Message.assistant("b"), Message.user("c")]
    trimmed = trim_history(history, max_tokens=10)
    assert trimmed.messages == (Message.user("c"),)
    assert trimmed.tokens == estimate_tokens(Message.user("c"))
    one_each = trim_history(history, max_tokens=3, count_tokens=lambda m: 1)
    assert one_each.messages == tuple(history)
    assert "2 older left out" in trimmed.describe()


def test_an_unfinished_exchange_is_left_out() -> None:
    call = ToolCall(id="x", name="calculator")
    history = [
        *_exchange(1),
        Message.user("q2"),
        Message.assistant("", (call, ToolCall(id="y", name="think"))),
        Message.tool("only one answer", tool_call_id="x", name="calculator"),
        Message.user("q3"),
        Message.tool("stray", tool_call_id="nobody", name="think"),
        Message.assistant("a3"),
    ]
    trimmed = trim_history(history)
    assert trimmed.incomplete == 3
    assert _valid(trimmed.messages)
    assert trimmed.messages == (*_exchange(1), Message.user("q2"), Message.user("q3"),
                                Message.assistant("a3"))  # fmt: skip
    assert "unfinished tool exchanges" in trimmed.describe()


def test_history_never_starts_with_an_assistant_message() -> None:
    history = [Message.assistant("greeting"), Message.user("q"), Message.assistant("a")]
    assert trim_history(history).messages == tuple(history[1:])
    assert trim_history(history, max_messages=1).messages == ()


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        trim_history([], max_tokens=-1)
