"""Keeping a conversation inside a context window, oldest step first.

Tokens are estimated as characters / 4 plus 4 per message (close enough for budgeting
without a tokenizer). When the estimate is over budget, in this order, until it fits:

1. the output of the oldest steps after the task is replaced by a short note (the newest
   step and its observation are kept);
2. the earlier conversation (between the system prompt and the task) likewise;
3. the newest observation, then the task itself, are cut in the middle (their beginning
   and end are kept).

The system prompt is never touched. Messages are never removed, only shortened, so roles
keep alternating and tool-call answers keep their calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from jarvis.domain.messages import Message, Role

OMITTED = "[Earlier output removed to fit the context window.]"
CUT = "\n[... {count} characters cut to fit the context window ...]\n"


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A token estimate for ``messages`` (characters / 4, plus 4 per message)."""
    characters = 0
    for message in messages:
        characters += len(message.content)
        for call in message.tool_calls:
            characters += len(call.name) + len(call.arguments_json())
    return characters // 4 + 4 * len(messages)


def fit_messages(
    messages: Sequence[Message], *, max_tokens: int, task_index: int
) -> tuple[Message, ...]:
    """``messages`` shortened to about ``max_tokens`` (see the module docstring).

    ``task_index`` is the index of the user message that states the task; everything
    after it is the run's own steps.
    """
    fitted = list(messages)
    excess = estimate_tokens(fitted) - max_tokens
    if excess <= 0:
        return tuple(fitted)
    first = 1 if fitted and fitted[0].role is Role.SYSTEM else 0
    newest = max(task_index + 1, len(fitted) - 2)
    candidates = [*range(task_index + 1, newest), *range(first, task_index)]
    for index in candidates:
        if excess <= 0:
            break
        message = fitted[index]
        saved = (len(message.content) - len(OMITTED)) // 4
        if saved > 0:
            fitted[index] = replace(message, content=OMITTED)
            excess -= saved
    for index in [*range(len(fitted) - 1, task_index, -1), task_index]:
        if excess <= 0:
            break
        if 0 <= index < len(fitted):
            fitted[index], saved = _cut_middle(fitted[index], excess * 4)
            excess -= saved // 4
    return tuple(fitted)


def _cut_middle(message: Message, characters: int) -> tuple[Message, int]:
    """``message`` with about ``characters`` characters cut from the middle of its text."""
    text = message.content
    marker = CUT.format(count=characters)
    keep = len(text) - characters - len(marker)
    if keep < 200:
        keep = min(200, len(text))
    if keep >= len(text):
        return message, 0
    head = keep // 2
    tail = keep - head
    removed = len(text) - keep
    shortened = text[:head] + CUT.format(count=removed) + (text[-tail:] if tail else "")
    return replace(message, content=shortened), max(0, len(text) - len(shortened))
