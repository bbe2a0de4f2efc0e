"""The code-execution port: a REPL factory and its sessions."""

from __future__ import annotations

from typing import Protocol

from jarvis.domain.repl import ExecutionResult, ReplCallbacks, ReplIsolation, ReplLimits


class ReplSession(Protocol):
    """One persistent Python interpreter, owned by one agent run or one tool call.

    Variables persist between executions. Executions run one at a time (concurrent calls
    queue). Code reaches the host only through ``llm_query``, ``llm_batch``, ``tool_call``
    (answered by the session's :class:`~jarvis.domain.repl.ReplCallbacks`), and ends an
    RLM run with ``FINAL(value)`` / ``FINAL_VAR("name")``.
    """

    @property
    def isolation(self) -> ReplIsolation:
        """What confines this session's code."""
        ...

    async def execute(self, code: str) -> ExecutionResult:
        """Run ``code`` and report stdout, stderr, the last expression's value and errors.

        Never raises for anything the code does: an exception, a syntax error, a limit hit
        (time, CPU, memory), ``FINAL_VAR`` of a missing variable or a dead interpreter all
        come back as an :class:`ExecutionResult` with ``error`` set. ``FINAL``/``FINAL_VAR``
        stop the code at once; only the first one counts. When the interpreter had to be
        killed (timeout) or died, the next execution starts a fresh one, reports
        ``restarted=True`` and has lost every variable except those set with
        :meth:`set_variable`. Raises ``SandboxError`` only when no interpreter can be
        started at all, and ``RuntimeError`` after :meth:`aclose`.
        """
        ...

    async def set_variable(self, name: str, value: str) -> None:
        """Bind ``name`` to the string ``value`` in the interpreter (e.g. the RLM's
        ``context``); the binding is restored after a restart. ``name`` must be an
        identifier (``ValueError`` otherwise)."""
        ...

    async def aclose(self) -> None:
        """Stop the interpreter and remove its working directory. Idempotent."""
        ...


class ReplPort(Protocol):
    """Starts REPL sessions (the factory agents and the ``code_interpreter`` tool take)."""

    def isolation(self) -> ReplIsolation:
        """What confines the code of the sessions this port starts, as found on this
        machine (may probe the OS once; never raises)."""
        ...

    async def start(
        self,
        *,
        callbacks: ReplCallbacks | None = None,
        limits: ReplLimits | None = None,
    ) -> ReplSession:
        """A fresh session, ready to execute, with its own empty working directory.

        Without ``callbacks`` the code's ``llm_query``/``llm_batch``/``tool_call`` fail
        with a message saying they are not available. Raises ``SandboxError`` when the
        interpreter cannot be started.
        """
        ...
