"""The loop guard: warn, then block; unchanged results only; ping-pong; per run."""

from __future__ import annotations

from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.guard import LoopGuard, LoopGuardConfig, canonical_call


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id="x", name=name, arguments=dict(arguments))  # type: ignore[arg-type]


def run(guard: LoopGuard, c: ToolCall, result: str = "same") -> str:
    verdict = guard.check(c)
    if verdict.allowed:
        guard.record(c, result)
    return verdict.action


def test_canonical_identity_ignores_key_order_and_name_case() -> None:
    assert canonical_call(call("Calc", a=1, b=2)) == canonical_call(call("calc", b=2, a=1))
    assert canonical_call(call("calc", a=1)) != canonical_call(call("calc", a=2))


def test_identical_calls_are_warned_then_blocked() -> None:
    guard = LoopGuard(LoopGuardConfig(max_identical_calls=2))
    c = call("search", q="x")
    assert [run(guard, c) for _ in range(5)] == ["allow", "allow", "warn", "block", "block"]


def test_the_warning_repeats_the_earlier_result_and_names_the_tool() -> None:
    guard = LoopGuard(LoopGuardConfig(max_identical_calls=1))
    c = call("search", q="x")
    run(guard, c, "the answer is 42")
    verdict = guard.check(c)
    assert verdict.action == "warn"
    assert verdict.pattern == "identical_call"
    assert "'search'" in verdict.message
    assert "the answer is 42" in verdict.message
    assert "refused" in verdict.message
    blocked = guard.check(c)
    assert blocked.action == "block"
    assert blocked.message.startswith("Loop guard:")


def test_a_changing_result_is_polling_not_a_loop() -> None:
    guard = LoopGuard(LoopGuardConfig(max_identical_calls=2))
    c = call("job_status", id=7)
    actions = [run(guard, c, f"progress {i}") for i in range(6)]
    assert actions == ["allow"] * 6


def test_ping_pong_between_two_calls_is_caught() -> None:
    guard = LoopGuard(LoopGuardConfig(max_identical_calls=10, ping_pong_window=6))
    a, b = call("a"), call("b")
    actions = [run(guard, x) for x in (a, b, a, b, a, b, a, b)]
    assert actions == ["allow"] * 5 + ["warn", "block", "block"]


def test_a_three_call_cycle_is_caught_and_other_sequences_are_not() -> None:
    guard = LoopGuard(LoopGuardConfig(max_identical_calls=10, ping_pong_window=6))
    a, b, c = call("a"), call("b"), call("c")
    assert [run(guard, x) for x in (a, b, c, a, b, c)][-1] == "warn"
    calm = LoopGuard(LoopGuardConfig(max_identical_calls=10, ping_pong_window=6))
    assert {run(calm, call("t", i=i % 4)) for i in range(12)} == {"allow"}


def test_disabled_guard_allows_everything() -> None:
    guard = LoopGuard(LoopGuardConfig(enabled=False))
    c = call("x")
    assert {run(guard, c) for _ in range(10)} == {"allow"}


def test_each_guard_starts_fresh() -> None:
    config = LoopGuardConfig(max_identical_calls=1)
    c = call("x")
    first = LoopGuard(config)
    run(first, c)
    assert first.check(c).action == "warn"
    assert LoopGuard(config).check(c).action == "allow"
