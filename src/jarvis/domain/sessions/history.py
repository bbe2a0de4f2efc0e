"""Bounding a replayed history without ever breaking a tool exchange apart.

An engine rejects (or a model misreads) an assistant tool call without its result, or a tool
result whose call is gone. So history is cut in *units*: a plain message, or an assistant
message with tool calls together with the tool messages that answer every one of its calls.
A unit whose calls were never all answered (the process died mid-run) or a tool message
whose call is not right before it cannot be replayed and is left out. The kept history
starts on a user message, so chat templates that insist on user/assistant alternation accept
it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jarvis.domain.llm.messages import Message, Role


def estimate_tokens(message: Message) -> int:
    """A tokenizer-free estimate: about 4 characters a token, plus a little per message."""
    chars = len(message.content) + sum(
        len(call.name) + len(call.arguments_json()) for call in message.tool_calls
    )
    return 4 + (chars + 3) // 4


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimmedHistory:
    """The history to replay and what was left out of it (for ``--verbose``)."""

    messages: tuple[Message, ...]
    dropped: int = 0
    incomplete: int = 0
    tokens: int = 0

    def describe(self) -> str:
        """One line saying what the prompt's history holds."""
        text = f"history: {len(self.messages)} messages (~{self.tokens} tokens)"
        if self.dropped:
            text += f", {self.dropped} older left out"
        if self.incomplete:
            text += f", {self.incomplete} from unfinished tool exchanges left out"
        return text


def replay_units(messages: Sequence[Message]) -> tuple[list[tuple[Message, ...]], int]:
    """Split ``messages`` into replayable units; also return how many messages were unusable."""
    units: list[tuple[Message, ...]] = []
    unusable = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role is Role.TOOL:
            unusable += 1  # its call is not right before it
            continue
        if message.role is not Role.ASSISTANT or not message.tool_calls:
            units.append((message,))
            continue
        waiting = {call.id for call in message.tool_calls}
        unit = [message]
        while waiting and index < len(messages):
            answer = messages[index]
            if answer.role is not Role.TOOL or answer.tool_call_id not in waiting:
                break
            waiting.discard(answer.tool_call_id)
            unit.append(answer)
            index += 1
        if waiting:
            unusable += len(unit)
        else:
            units.append(tuple(unit))
    return units, unusable


def trim_history(
    messages: Sequence[Message],
    *,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[Message], int] = estimate_tokens,
) -> TrimmedHistory:
    """The newest replayable part of ``messages`` within both bounds, dropping oldest first.

    Units are kept whole, newest first, until the next older one would exceed a bound; then
    units are dropped from the front until the history starts on a user message. A bound of
    ``None`` is no bound; ``0`` keeps nothing.
    """
    if (max_messages is not None and max_messages < 0) or (
        max_tokens is not None and max_tokens < 0
    ):
        raise ValueError("history bounds must be >= 0")
    units, incomplete = replay_units(messages)
    kept: list[tuple[tuple[Message, ...], int]] = []
    count = tokens = 0
    for unit in reversed(units):
        unit_tokens = sum(count_tokens(m) for m in unit)
        if max_messages is not None and count + len(unit) > max_messages:
            break
        if max_tokens is not None and tokens + unit_tokens > max_tokens:
            break
        kept.append((unit, unit_tokens))
        count += len(unit)
        tokens += unit_tokens
    kept.reverse()
    while kept and kept[0][0][0].role is not Role.USER:
        _, unit_tokens = kept.pop(0)
        tokens -= unit_tokens
    replay = tuple(m for unit, _ in kept for m in unit)
    usable = sum(len(unit) for unit in units)
    return TrimmedHistory(
        messages=replay, dropped=usable - len(replay), incomplete=incomplete, tokens=tokens
    )
