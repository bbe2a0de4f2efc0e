"""How much of an engine's reply is believed: size, length and usage bounds per request.

An engine is a peer on the network, and a broken or hostile one can send a body that never
ends, a stream of tokens that never ends, or figures that make no sense. Every reply is
therefore bounded by what the request asked for, so that nothing an engine sends can grow
without limit:

* **bytes**: the body (or the whole stream) may be at most ``BASE_BYTES`` plus
  ``BYTES_PER_TOKEN`` per requested token (about four times the wire size of the chattiest
  real streams, vLLM's, at one event per token), never more than ``CEILING_BYTES``;
* **generated text**: content and tool-call text may be at most ``CHARS_PER_TOKEN``
  characters per requested token (real text averages about four), plus ``BASE_CHARS``;
  each tool call also counts as ``CALL_CHARS``, so a flood of empty calls is bounded too;
* **stream events**: at most ``EVENTS_PER_TOKEN`` per requested token, plus
  ``BASE_EVENTS`` (servers send one per token, or fewer, plus a few of their own);
* **usage**: a token count that is not an int, is negative, exceeds ``MAX_USAGE`` or, for
  completion tokens, exceeds the event bound, is not trusted: the usage is dropped.

Anything beyond is a :class:`ReplyTooLarge` (an ``EngineProtocolError`` for the caller): the
engine did not do what was asked. The margins are wide on purpose, so that no honest
answer ever meets them; they are there to stop the dishonest ones early.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_BYTES = 8 * 1024 * 1024
BYTES_PER_TOKEN = 2048
CEILING_BYTES = 512 * 1024 * 1024
BASE_CHARS = 1024
CHARS_PER_TOKEN = 64
CALL_CHARS = 64
BASE_EVENTS = 64
EVENTS_PER_TOKEN = 4
MAX_USAGE = 10**9
ERROR_BODY_BYTES = 64 * 1024
"""An error body is read only this far: only its message is ever used."""
LIST_BYTES = BASE_BYTES
"""Bound on bodies that answer no generation request (model lists)."""


class ReplyTooLarge(ValueError):
    """The reply went past one of the bounds of its request."""


@dataclass(frozen=True, slots=True)
class ReplyBounds:
    """The bounds of the reply to one request."""

    max_bytes: int
    max_chars: int
    max_events: int

    @classmethod
    def for_tokens(cls, max_tokens: int) -> ReplyBounds:
        """The bounds of a reply to a request for at most ``max_tokens`` tokens."""
        tokens = max(1, max_tokens)
        return cls(
            max_bytes=min(CEILING_BYTES, BASE_BYTES + BYTES_PER_TOKEN * tokens),
            max_chars=BASE_CHARS + CHARS_PER_TOKEN * tokens,
            max_events=BASE_EVENTS + EVENTS_PER_TOKEN * tokens,
        )

    def check_text(self, chars: int, calls: int = 0) -> None:
        """Raise :class:`ReplyTooLarge` when a whole reply's text is beyond the bound."""
        if chars + CALL_CHARS * calls > self.max_chars:
            raise ReplyTooLarge(
                f"a reply far longer than the {self.max_chars - BASE_CHARS} characters that "
                "max_tokens allows"
            )


class ReplyMeter:
    """Counts a streamed reply as it arrives; raises :class:`ReplyTooLarge` past a bound."""

    __slots__ = ("bounds", "calls", "chars", "events")

    def __init__(self, bounds: ReplyBounds) -> None:
        self.bounds = bounds
        self.events = 0
        self.chars = 0
        self.calls = 0

    def event(self, chars: int = 0) -> None:
        """One stream event carrying ``chars`` characters of generated text."""
        self.events += 1
        self.chars += chars
        if self.events > self.bounds.max_events:
            raise ReplyTooLarge(
                f"more than {self.bounds.max_events} stream events for a reply of at most "
                f"{(self.bounds.max_events - BASE_EVENTS) // EVENTS_PER_TOKEN} tokens"
            )
        if chars:
            self.bounds.check_text(self.chars, self.calls)

    def call(self) -> None:
        """A new tool call started in the stream."""
        self.calls += 1
        self.bounds.check_text(self.chars, self.calls)


def trusted_count(value: object, ceiling: int = MAX_USAGE) -> int | None:
    """``value`` as a token count, or ``None`` when it cannot be one (never raises)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < 0 or value > ceiling:
        return None
    return value
