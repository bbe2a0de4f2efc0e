"""``InMemoryRepl``: a REPL test double that runs code in THIS process, with NO isolation.

It exists so that agent tests run in microseconds and without subprocesses. It behaves
like the real REPL for well-behaved code (persistent variables, the last expression's value,
``FINAL``/``FINAL_VAR``, the ``llm_query``/``llm_batch``/``tool_call`` callbacks, bounded
output) and passes the same contract suite (``contracts/repl_contract.py``). It has no
time, memory or process limits, no network or filesystem confinement and reads the host's
environment: never give it code you would not run yourself. ``print`` is captured; writes
to ``sys.stdout`` are not.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn, TypeVar

from jarvis.domain.json_types import JSONObject
from jarvis.domain.repl import (
    STREAM_TRUNCATION_MARKER,
    ExecutionResult,
    ReplCallbacks,
    ReplIsolation,
    ReplLimits,
)

_T = TypeVar("_T")

NO_ISOLATION = ReplIsolation(
    network="none",
    processes="none",
    user="the test process itself",
    environment_scrubbed=False,
    writes_confined=False,
)


class _Final(BaseException):
    pass


class ReplCallbackError(RuntimeError):
    """A callback to the host failed (same name as in the real worker)."""


class _Capture:
    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0
        self.limit = limit

    def write(self, text: str) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))

    def value(self) -> str:
        text = "".join(self.parts)
        if self.dropped:
            text += STREAM_TRUNCATION_MARKER.format(dropped=self.dropped)
        return text


class InMemoryReplSession:
    """One in-process namespace. See the module docstring: NOT a sandbox."""

    def __init__(self, limits: ReplLimits, callbacks: ReplCallbacks | None) -> None:
        self._limits = limits
        self._callbacks = callbacks
        self._namespace: dict[str, Any] = {"__name__": "__main__"}
        self._closed = False
        self._lock = asyncio.Lock()
        self._final: str | None = None
        self._final_error: str | None = None
        self._count = 0
        self.executed: list[str] = []
        """Every piece of code executed, in order (for assertions)."""

    @property
    def isolation(self) -> ReplIsolation:
        return NO_ISOLATION

    async def set_variable(self, name: str, value: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"not a valid variable name: {name!r}")
        if self._closed:
            raise RuntimeError("the REPL session is closed")
        self._namespace[name] = value

    async def aclose(self) -> None:
        self._closed = True

    async def execute(self, code: str) -> ExecutionResult:
        if self._closed:
            raise RuntimeError("the REPL session is closed")
        async with self._lock:
            self.executed.append(code)
            loop = asyncio.get_running_loop()
            return await asyncio.to_thread(self._execute, code, loop)

    # -- runs in a worker thread ---------------------------------------------------------

    def _execute(self, code: str, loop: asyncio.AbstractEventLoop) -> ExecutionResult:
        self._count += 1
        self._final = None
        self._final_error = None
        limit = self._limits.max_output_chars
        out = _Capture(limit)
        self._install(out, loop)
        filename = f"<repl-{self._count}>"
        value: str | None = None
        error: str | None = None
        kind: Any = None
        details = ""
        started = loop.time()
        try:
            tree = ast.parse(code, filename, "exec")
            last: ast.Expression | None = None
            tail = tree.body[-1] if tree.body else None
            if isinstance(tail, ast.Expr):
                tree.body.pop()
                last = ast.Expression(tail.value)
            exec(compile(tree, filename, "exec"), self._namespace)
            if last is not None:
                result = eval(compile(last, filename, "eval"), self._namespace)
                if result is not None:
                    value = repr(result)
        except _Final:
            pass
        except SyntaxError as exc:
            kind = "syntax"
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        except Exception as exc:
            kind = "memory_limit" if isinstance(exc, MemoryError) else "exception"
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            details = "".join(traceback.format_exception(exc))
        final_error = self._pending_final_error()
        if final_error is not None:
            kind, error = "final_var_missing", final_error
        truncated = out.dropped > 0
        if value is not None and len(value) > limit:
            value, truncated = value[:limit] + "\n... [value truncated]", True
        return ExecutionResult(
            stdout=out.value(),
            value=value,
            error=error,
            error_kind=kind,
            traceback=details[:limit],
            final=self._final,
            truncated=truncated,
            duration_seconds=loop.time() - started,
        )

    def _pending_final_error(self) -> str | None:
        return self._final_error

    def _install(self, out: _Capture, loop: asyncio.AbstractEventLoop) -> None:
        session = self

        def call(factory: Callable[[], Awaitable[_T]], kind: str) -> _T:
            if session._callbacks is None:
                raise ReplCallbackError(f"{kind} is not available here: no callbacks were given")

            async def run() -> _T:
                return await factory()

            coroutine: Coroutine[Any, Any, _T] = run()
            try:
                return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
            except Exception as exc:
                raise ReplCallbackError(f"{type(exc).__name__}: {exc}") from None

        def print_(*args: object, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
            out.write((sep if sep is not None else " ").join(map(str, args)))
            out.write(end if end is not None else "\n")

        def llm_query(prompt: object) -> str:
            if not isinstance(prompt, str):
                raise TypeError(f"llm_query(prompt) needs a str, got {type(prompt).__name__}")
            callbacks = session._callbacks
            if callbacks is None:
                raise ReplCallbackError("llm_query is not available here: no callbacks were given")
            return call(lambda: callbacks.llm_query(prompt), "llm_query")

        def llm_batch(prompts: object) -> list[str]:
            if not isinstance(prompts, (list, tuple)) or not all(
                isinstance(p, str) for p in prompts
            ):
                raise TypeError("llm_batch(prompts) needs a list of str")
            items = [str(p) for p in prompts]
            callbacks = session._callbacks
            if callbacks is None:
                raise ReplCallbackError("llm_batch is not available here: no callbacks were given")
            return call(lambda: callbacks.llm_batch(items), "llm_batch")

        def tool_call(name: str, arguments: dict[str, Any] | None = None, /, **kwargs: Any) -> str:
            merged: JSONObject = {**(arguments or {}), **kwargs}
            callbacks = session._callbacks
            if callbacks is None:
                raise ReplCallbackError("tool_call is not available here: no callbacks were given")
            result = call(lambda: callbacks.tool_call(name, merged), "tool_call")
            if not result.success:
                raise ReplCallbackError(result.content)
            return result.content

        def final(value: object) -> NoReturn:
            if session._final is None and session._final_error is None:
                session._final = value if isinstance(value, str) else str(value)
            raise _Final

        def final_var(name: str) -> NoReturn:
            if session._final is None and session._final_error is None:
                key = name.strip().strip("'\"") if isinstance(name, str) else name
                if not isinstance(key, str) or key not in session._namespace:
                    session._final_error = (
                        f"FINAL_VAR: there is no variable named {name!r}; "
                        "assign it first, or call FINAL(value)"
                    )
                else:
                    found = session._namespace[key]
                    session._final = found if isinstance(found, str) else str(found)
            raise _Final

        self._namespace.update(
            __builtins__=builtins,
            print=print_,
            llm_query=llm_query,
            llm_batch=llm_batch,
            tool_call=tool_call,
            FINAL=final,
            FINAL_VAR=final_var,
            ReplCallbackError=ReplCallbackError,
        )


class InMemoryRepl:
    """The test-double REPL factory; ``sessions`` records every session it started."""

    def __init__(self, *, limits: ReplLimits | None = None) -> None:
        self.limits = limits or ReplLimits()
        self.sessions: list[InMemoryReplSession] = []

    def isolation(self) -> ReplIsolation:
        return NO_ISOLATION

    async def start(
        self,
        *,
        callbacks: ReplCallbacks | None = None,
        limits: ReplLimits | None = None,
    ) -> InMemoryReplSession:
        session = InMemoryReplSession(limits or self.limits, callbacks)
        self.sessions.append(session)
        return session
