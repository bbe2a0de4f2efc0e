"""The behaviour every ReplPort implementation shows (the isolated subprocess REPL and the
in-memory test double alike).

A subclass provides the ``repl`` fixture: a fresh REPL factory. Only well-behaved code is
run here; hostile code (limits, isolation) is the business of the real adapter's own
tests, because the test double has no limits by design.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Generic, TypeVar

import pytest

from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import ReplPort, ReplSession
from jarvis.domain.repl import ReplIsolation, ReplLimits
from jarvis.domain.tools.specs import ToolResult

ReplT = TypeVar("ReplT", bound=ReplPort)


class RecordingCallbacks:
    """Answers callbacks from canned rules and records every call."""

    def __init__(self, *, fail_llm: bool = False) -> None:
        self.queries: list[str] = []
        self.batches: list[list[str]] = []
        self.tool_calls: list[tuple[str, JSONObject]] = []
        self.fail_llm = fail_llm

    async def llm_query(self, prompt: str) -> str:
        self.queries.append(prompt)
        if self.fail_llm:
            raise RuntimeError("the engine is down")
        return f"answer to {prompt}"

    async def llm_batch(self, prompts: Sequence[str]) -> list[str]:
        self.batches.append(list(prompts))
        return [f"answer to {p}" for p in prompts]

    async def tool_call(self, name: str, arguments: JSONObject) -> ToolResult:
        self.tool_calls.append((name, arguments))
        if name == "broken":
            return ToolResult(tool_name=name, content="Error: broken tool", success=False)
        return ToolResult(tool_name=name, content=f"{name} ran with {sorted(arguments.items())}")


LIMITS = ReplLimits(timeout_seconds=20, max_output_chars=1000)


class ReplContract(Generic[ReplT]):
    """Subclass with a ``repl`` fixture returning a fresh REPL factory."""

    @pytest.fixture
    def repl(self) -> ReplT:
        raise NotImplementedError("subclass must provide the `repl` fixture")

    @pytest.fixture
    def callbacks(self) -> RecordingCallbacks:
        return RecordingCallbacks()

    @pytest.fixture
    async def session(
        self, repl: ReplT, callbacks: RecordingCallbacks
    ) -> AsyncIterator[ReplSession]:
        session = await repl.start(callbacks=callbacks, limits=LIMITS)
        try:
            yield session
        finally:
            await session.aclose()

    # -- state and values ----------------------------------------------------------------

    async def test_variables_persist_between_executions(self, session: ReplSession) -> None:
        assert (await session.execute("x = 40")).ok
        assert (await session.execute("def f(n):\n    return n + x")).ok
        result = await session.execute("f(2)")
        assert result.ok
        assert result.value == "42"

    async def test_the_last_expression_is_the_value(self, session: ReplSession) -> None:
        result = await session.execute("a = [1, 2]\na + [3]")
        assert result.value == "[1, 2, 3]"
        assert (await session.execute("a = 5")).value is None
        assert (await session.execute("None")).value is None
        assert (await session.execute("'text'")).value == "'text'"

    async def test_print_is_captured(self, session: ReplSession) -> None:
        result = await session.execute("print('hello', 42)\nprint('again')")
        assert result.stdout == "hello 42\nagain\n"
        assert result.ok
        assert "hello 42" in result.observation()

    async def test_a_statement_without_output_says_so(self, session: ReplSession) -> None:
        result = await session.execute("y = 1")
        assert result.observation() == "(no output)"

    # -- errors --------------------------------------------------------------------------

    async def test_an_exception_is_reported_and_state_survives(self, session: ReplSession) -> None:
        await session.execute("kept = 'yes'")
        result = await session.execute("print('before')\n1 / 0\nprint('after')")
        assert not result.ok
        assert result.error_kind == "exception"
        assert result.error is not None
        assert "ZeroDivisionError" in result.error
        assert result.stdout == "before\n"
        assert "ZeroDivisionError" in result.observation()
        assert (await session.execute("kept")).value == "'yes'"

    async def test_a_syntax_error_is_reported(self, session: ReplSession) -> None:
        result = await session.execute("def broken(:\n    pass")
        assert result.error_kind == "syntax"
        assert result.error is not None
        assert "SyntaxError" in result.error
        assert (await session.execute("1 + 1")).value == "2"

    # -- FINAL / FINAL_VAR ---------------------------------------------------------------

    async def test_final_stops_the_rest_of_the_code(self, session: ReplSession) -> None:
        result = await session.execute("print('one')\nFINAL('the answer')\nprint('two')\nz = 1")
        assert result.final == "the answer"
        assert result.has_final
        assert result.ok
        assert result.stdout == "one\n"
        assert (await session.execute("'z' in dir()")).value == "False"

    async def test_final_of_a_non_string_is_its_text(self, session: ReplSession) -> None:
        assert (await session.execute("FINAL(6 * 7)")).final == "42"

    async def test_final_var_returns_the_variable(self, session: ReplSession) -> None:
        await session.execute("summary = 'long ' * 3")
        result = await session.execute('FINAL_VAR("summary")')
        assert result.final == "long long long "

    async def test_final_var_of_a_missing_variable_is_an_error(self, session: ReplSession) -> None:
        result = await session.execute('FINAL_VAR("nothing_here")')
        assert result.final is None
        assert not result.has_final
        assert result.error_kind == "final_var_missing"
        assert result.error is not None
        assert "nothing_here" in result.error

    async def test_only_the_first_final_counts(self, session: ReplSession) -> None:
        code = "try:\n    FINAL('first')\nexcept BaseException:\n    FINAL('second')"
        assert (await session.execute(code)).final == "first"

    async def test_final_does_not_leak_into_the_next_execution(self, session: ReplSession) -> None:
        assert (await session.execute("FINAL(1)")).final == "1"
        assert (await session.execute("2")).final is None

    # -- callbacks -----------------------------------------------------------------------

    async def test_llm_query_is_answered_by_the_host(
        self, session: ReplSession, callbacks: RecordingCallbacks
    ) -> None:
        result = await session.execute("reply = llm_query('capital of France?')\nreply.upper()")
        assert result.value == "'ANSWER TO CAPITAL OF FRANCE?'"
        assert callbacks.queries == ["capital of France?"]

    async def test_llm_query_with_a_non_string_fails_in_the_code(
        self, session: ReplSession, callbacks: RecordingCallbacks
    ) -> None:
        result = await session.execute("llm_query(42)")
        assert result.error_kind == "exception"
        assert result.error is not None
        assert "TypeError" in result.error
        assert callbacks.queries == []
        assert (await session.execute("1")).value == "1"

    async def test_llm_batch_answers_in_order(
        self, session: ReplSession, callbacks: RecordingCallbacks
    ) -> None:
        result = await session.execute("llm_batch(['a', 'b', 'c'])")
        assert result.value == "['answer to a', 'answer to b', 'answer to c']"
        assert callbacks.batches == [["a", "b", "c"]]

    async def test_llm_batch_with_a_non_string_item_fails(self, session: ReplSession) -> None:
        result = await session.execute("llm_batch(['a', 2])")
        assert result.error is not None
        assert "TypeError" in result.error

    async def test_tool_call_reaches_the_host_tool(
        self, session: ReplSession, callbacks: RecordingCallbacks
    ) -> None:
        result = await session.execute("tool_call('calculator', expression='2+2')")
        assert result.ok
        assert callbacks.tool_calls == [("calculator", {"expression": "2+2"})]
        assert result.value is not None
        assert "calculator ran with" in result.value
        positional = await session.execute("tool_call('think', {'thought': 'hm'})")
        assert positional.ok
        assert callbacks.tool_calls[-1] == ("think", {"thought": "hm"})

    async def test_a_failed_tool_raises_in_the_code(self, session: ReplSession) -> None:
        result = await session.execute(
            "try:\n    tool_call('broken')\nexcept ReplCallbackError as e:\n    print('caught', e)"
        )
        assert result.ok
        assert "caught Error: broken tool" in result.stdout

    async def test_a_failing_callback_fails_the_call_not_the_session(self, repl: ReplT) -> None:
        session = await repl.start(callbacks=RecordingCallbacks(fail_llm=True), limits=LIMITS)
        try:
            result = await session.execute("llm_query('hi')")
            assert result.error is not None
            assert "the engine is down" in result.error
            assert (await session.execute("3")).value == "3"
        finally:
            await session.aclose()

    async def test_without_callbacks_the_functions_say_they_are_unavailable(
        self, repl: ReplT
    ) -> None:
        session = await repl.start(limits=LIMITS)
        try:
            result = await session.execute("llm_query('hi')")
            assert result.error is not None
            assert "not available" in result.error
        finally:
            await session.aclose()

    # -- output bounds -------------------------------------------------------------------

    async def test_output_is_bounded_with_a_marker(self, session: ReplSession) -> None:
        result = await session.execute("for i in range(500):\n    print('x' * 50)")
        assert result.truncated
        assert len(result.stdout) < LIMITS.max_output_chars + 100
        assert "truncated" in result.stdout
        assert result.stdout.startswith("x" * 50)

    async def test_a_long_value_is_bounded(self, session: ReplSession) -> None:
        result = await session.execute("'y' * 50_000")
        assert result.truncated
        assert result.value is not None
        assert len(result.value) < LIMITS.max_output_chars + 100

    # -- variables from the host ---------------------------------------------------------

    async def test_set_variable_binds_a_string(self, session: ReplSession) -> None:
        text = "line\n" * 1000 + "ünïcode ✓"
        await session.set_variable("context", text)
        assert (await session.execute("len(context)")).value == str(len(text))
        assert (await session.execute("context[-9:]")).value == repr("ünïcode ✓")

    async def test_set_variable_refuses_a_bad_name(self, session: ReplSession) -> None:
        with pytest.raises(ValueError, match="name"):
            await session.set_variable("not a name", "x")

    # -- life cycle ----------------------------------------------------------------------

    async def test_isolation_is_reported(self, repl: ReplT, session: ReplSession) -> None:
        assert isinstance(repl.isolation(), ReplIsolation)
        assert session.isolation == repl.isolation()
        assert session.isolation.describe()

    async def test_executions_queue_one_at_a_time(self, session: ReplSession) -> None:
        await session.execute("log = []")
        results = await asyncio.gather(
            *(session.execute(f"log.append({i})\nlen(log)") for i in range(5))
        )
        assert sorted(r.value or "" for r in results) == ["1", "2", "3", "4", "5"]

    async def test_close_is_idempotent_and_final(self, repl: ReplT) -> None:
        session = await repl.start(limits=LIMITS)
        assert (await session.execute("1")).value == "1"
        await session.aclose()
        await session.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await session.execute("1")

    async def test_sessions_do_not_share_variables(self, repl: ReplT) -> None:
        first = await repl.start(limits=LIMITS)
        second = await repl.start(limits=LIMITS)
        try:
            await first.execute("secret = 1")
            result = await second.execute("secret")
            assert result.error is not None
            assert "NameError" in result.error
        finally:
            await first.aclose()
            await second.aclose()
