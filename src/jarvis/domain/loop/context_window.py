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

The agent loop consults a :class:`ContextWindow` (the policy, a setting of the agent) through
the :class:`WindowFit` it opens for each run (the run's own, shrinking budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role

OMITTED = "[Earlier output removed to fit the context window.]"
CUT = "\n[... {count} characters cut to fit the context window ...]\n"
MIN_PROMPT_TOKENS = 256
"""A request is never shrunk below this estimate: smaller, it would say nothing useful."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextWindow:
    """How a run keeps its requests inside the model's context window.

    With ``max_prompt_tokens`` set, every request is fitted to it (see the module
    docstring); ``None`` sends the conversation as it is. When the engine reports a prompt
    as too long, the request is refitted to half its size and sent again, at most
    ``overflow_retries`` times per inference (0: the error propagates), and the smaller
    budget holds for the rest of the run.
    """

    max_prompt_tokens: int | None = None
    overflow_retries: int = 0

    def for_run(self, *, task_index: int) -> WindowFit:
        """The fit of one run whose task is the message at ``task_index``."""
        return WindowFit(self.max_prompt_tokens, task_index)


class WindowFit:
    """The context-window budget of one run (never shared between runs)."""

    __slots__ = ("_budget", "_task_index")

    def __init__(self, budget: int | None, task_index: int) -> None:
        self._budget = budget
        self._task_index = task_index

    def fit(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The messages to send, shortened to the run's budget."""
        if self._budget is None:
            return tuple(messages)
        return fit_messages(messages, max_tokens=self._budget, task_index=self._task_index)

    def shrink(self, request: InferenceRequest) -> InferenceRequest | None:
        """``request`` refitted to half its estimated size (the budget stays there for the
        rest of the run), or ``None`` when it is already as small as it can usefully be."""
        size = estimate_tokens(request.messages)
        budget = min(size, self._budget or size) // 2
        if budget < MIN_PROMPT_TOKENS:
            return None
        self._budget = budget
        return replace(request, messages=self.fit(request.messages))


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
