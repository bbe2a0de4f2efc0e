"""The run budget of a tool-using agent: turns, wall-clock time and tokens.

When any of them runs out the loop does not fail: it makes one last call without tools that
asks for the best final answer, and the result's stop reason names the limit that was hit
(also in ``metadata["budget_exhausted"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from jarvis.domain.run.contract import StopReason

BudgetKind = Literal["turns", "time", "tokens", "loop"]
"""Which limit ended the run; ``loop`` means the loop guard refused every call of several
consecutive turns."""

STOP_REASONS: Mapping[BudgetKind, StopReason] = {
    "turns": "max_turns",
    "time": "max_seconds",
    "tokens": "max_total_tokens",
    "loop": "loop_detected",
}
"""The stop reason of a run that a budget ended: the limit that ran out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBudget:
    """Limits of one run. ``max_turns`` counts tool-enabled inferences; the final tool-less
    call comes on top. ``None`` means no limit. ``max_parse_errors`` unreadable replies in a
    row end the run at once, with stop reason ``parse_error``."""

    max_turns: int = 10
    max_seconds: float | None = None
    max_total_tokens: int | None = None
    max_parse_errors: int = 3

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError("max_seconds must be positive")
        if self.max_total_tokens is not None and self.max_total_tokens <= 0:
            raise ValueError("max_total_tokens must be positive")
        if self.max_parse_errors < 1:
            raise ValueError("max_parse_errors must be at least 1")

    def exhausted(
        self, *, turns: int, tokens: int, now: float, deadline: float | None
    ) -> BudgetKind | None:
        """The first limit reached before the next turn, or ``None``."""
        if turns >= self.max_turns:
            return "turns"
        if deadline is not None and now >= deadline:
            return "time"
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            return "tokens"
        return None
