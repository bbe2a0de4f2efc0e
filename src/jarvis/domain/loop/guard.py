"""Loop detection with graduated intervention: warn the model, then refuse the call.

One guard lives for exactly one run (the agent loop makes a fresh one in every ``arun``), so
counters never leak between unrelated requests. Calls are compared by tool name and their
arguments as canonical JSON (sorted keys), so ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` are the
same call.

Two patterns are caught:

* **identical calls** — the same call made again although its result did not change. A
  polling tool whose answer changes between calls is therefore never flagged; only a call
  that keeps producing the same answer is a loop.
* **ping-pong** — the last ``ping_pong_window`` calls (the new one included) repeat a cycle
  of two or three different calls (A-B-A-B…, A-B-C-A-B-C), again with unchanged results.

The first time a pattern trips for a given call, the verdict is ``warn``: the call is not
run, and the warning (which repeats the earlier result) goes back to the model as the tool
result. Every later trip of that pattern is ``block``. When whole turns consist of blocked
calls only, the agent loop stops and asks for a final answer (``max_blocked_turns``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from jarvis.domain.llm.messages import ToolCall

LoopAction = Literal["allow", "warn", "block"]
LoopPattern = Literal["identical_call", "ping_pong"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopGuardConfig:
    """Thresholds of the loop guard.

    ``max_identical_calls`` is how many times the same call may run with the same result;
    the next one is warned, later ones blocked. ``ping_pong_window`` is how many recent calls
    must form a cycle (0 disables ping-pong detection). ``max_blocked_turns`` consecutive
    turns in which every call was refused end the run with a final answer.
    """

    enabled: bool = True
    max_identical_calls: int = 2
    ping_pong_window: int = 6
    max_blocked_turns: int = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopVerdict:
    """What to do with one call, and why (for the model and for the metadata)."""

    action: LoopAction
    pattern: LoopPattern | None = None
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.action == "allow"


ALLOW = LoopVerdict(action="allow")


def canonical_call(call: ToolCall) -> str:
    """The identity of a call: lower-cased tool name plus canonical JSON arguments."""
    if call.raw_arguments is not None:
        args = call.raw_arguments.strip()
    elif not call.arguments:
        args = "{}"
    else:
        try:
            args = json.dumps(call.arguments, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            args = repr(call.arguments)
    return f"{call.name.strip().lower()}\x00{args}"


class LoopGuard:
    """Per-run state of the loop guard. Check each call before it runs, record its result
    after."""

    __slots__ = ("_config", "_counts", "_history", "_last_result", "_warned")

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        self._config = config or LoopGuardConfig()
        self._counts: dict[str, int] = {}
        self._last_result: dict[str, str] = {}
        self._history: list[str] = []
        self._warned: set[tuple[LoopPattern, str]] = set()

    @property
    def config(self) -> LoopGuardConfig:
        return self._config

    def check(self, call: ToolCall) -> LoopVerdict:
        """The verdict for ``call``; counts it as made."""
        config = self._config
        if not config.enabled:
            return ALLOW
        key = canonical_call(call)
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        self._history.append(key)
        if count > config.max_identical_calls > 0:
            return self._trip("identical_call", key, call, count)
        cycle = self._ping_pong_cycle()
        if cycle is not None:
            return self._trip("ping_pong", cycle, call, count, key)
        return ALLOW

    def record(self, call: ToolCall, content: str) -> None:
        """Note the result of a call that ran; a changed result resets its repeat count."""
        if not self._config.enabled:
            return
        key = canonical_call(call)
        previous = self._last_result.get(key)
        if previous is not None and previous != content:
            self._counts[key] = 1
            # a changed answer also breaks any cycle this call was part of
            self._history = [key]
        self._last_result[key] = content

    def _ping_pong_cycle(self) -> str | None:
        """The identity of the cycle the latest calls form, or ``None``."""
        window = self._config.ping_pong_window
        history = self._history
        if window < 4 or len(history) < window:
            return None
        recent = history[-window:]
        for period in (2, 3):
            if window < 2 * period or len(set(recent[:period])) < period:
                continue
            if all(recent[i] == recent[i - period] for i in range(period, window)):
                return "\x01".join(sorted(recent[:period]))
        return None

    def _trip(
        self,
        pattern: LoopPattern,
        identity: str,
        call: ToolCall,
        count: int,
        key: str | None = None,
    ) -> LoopVerdict:
        previous = self._last_result.get(key or identity)
        if (pattern, identity) not in self._warned:
            self._warned.add((pattern, identity))
            what = (
                f"You already called '{call.name}' with these arguments {count - 1} times"
                if pattern == "identical_call"
                else f"You are alternating between the same calls (now '{call.name}') in a loop"
            )
            earlier = f" The result was:\n{previous}\n" if previous is not None else " "
            return LoopVerdict(
                action="warn",
                pattern=pattern,
                message=(
                    f"Loop guard: {what}, and the result did not change.{earlier}"
                    "This call was not run again. Use the result you have, try something "
                    "different, or give your final answer. Repeating it will be refused."
                ),
            )
        return LoopVerdict(
            action="block",
            pattern=pattern,
            message=(
                f"Loop guard: call to '{call.name}' refused — it repeats a loop you were "
                "warned about. Give your final answer now or take a different step."
            ),
        )
