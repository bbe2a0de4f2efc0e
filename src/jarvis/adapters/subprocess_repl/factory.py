"""``SubprocessRepl``: the :class:`~jarvis.domain.ports.ReplPort` that starts sandboxed
worker processes."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from jarvis.adapters.subprocess_repl.janitor import Janitor
from jarvis.adapters.subprocess_repl.sandbox import (
    NetworkMode,
    SandboxPlan,
    choose_unsafe_interpreter,
    plan_sandbox,
)
from jarvis.adapters.subprocess_repl.session import SubprocessReplSession
from jarvis.domain.errors import SandboxError
from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits

WORKER_SCRIPT = Path(__file__).with_name("worker.py")


class SubprocessRepl:
    """Starts one sandboxed interpreter per session.

    The interpreter runs ``-I -S -B``: standard library only, none of jarvis's
    site-packages. ``network`` chooses the plan (see
    :mod:`jarvis.adapters.subprocess_repl.sandbox`): ``auto``/``namespace`` = the OS
    sandbox, and no code at all where there is none; ``unsafe-audit-hook-only`` = the
    explicit opt-out. The plan is found on first use and kept. ``python`` overrides the
    interpreter (it must start inside the sandbox). ``limits`` are the defaults for
    sessions started without their own; ``temp_root`` is where working directories go.
    ``max_sessions`` bounds the interpreters this factory (one per process in jarvis) runs
    at once: a start beyond it is refused with a ``SandboxError`` the model reads (e.g. a
    hundred ``code_interpreter`` calls in one turn), never queued behind runs that hold
    theirs.
    """

    def __init__(
        self,
        *,
        limits: ReplLimits | None = None,
        network: NetworkMode = "auto",
        python: str | None = None,
        temp_root: str | None = None,
        max_sessions: int = 8,
    ) -> None:
        if max_sessions <= 0:
            raise ValueError("max_sessions must be positive")
        self.limits = limits or ReplLimits()
        self.network: NetworkMode = network
        self._python = python
        self.temp_root = temp_root
        self._plan: SandboxPlan | None = None
        self._worker_source: bytes | None = None
        self._janitor = Janitor()
        self.max_sessions = max_sessions
        self._active = 0

    def plan(self) -> SandboxPlan:
        """The sandbox plan in force (probed on first call)."""
        if self._plan is None:
            self._plan = plan_sandbox(self.network)
        return self._plan

    @property
    def python(self) -> str:
        """The interpreter the worker runs on (probed on first use)."""
        if self._python is None:
            plan = self.plan()
            if plan.bwrap is not None and plan.python is not None:
                self._python = plan.python
            else:
                self._python = choose_unsafe_interpreter(plan)
        return self._python

    def isolation(self) -> ReplIsolation:
        return self.plan().isolation

    def command(self) -> tuple[str, ...]:
        """The interpreter's own command line (inside the sandbox, when there is one)."""
        return (self.python, "-I", "-S", "-B", str(WORKER_SCRIPT))

    def close(self) -> None:
        """Stop the reaper (it removes whatever a session left). Optional: it also stops
        when the factory is garbage-collected or the process exits."""
        self._janitor.close()

    async def start(
        self,
        *,
        callbacks: ReplCallbacks | None = None,
        limits: ReplLimits | None = None,
    ) -> SubprocessReplSession:
        plan = await asyncio.to_thread(self.plan) if self._plan is None else self._plan
        if not plan.isolation.runs_code:
            raise plan.refuse()
        if self._active >= self.max_sessions:
            raise SandboxError(
                f"Too many Python interpreters at once: at most {self.max_sessions} run at "
                "the same time in this process.",
                hint="Run the code in fewer calls, or wait for one to finish.",
            )
        python = self.python
        if self._worker_source is None:
            self._worker_source = WORKER_SCRIPT.read_bytes()
        workdir = Path(tempfile.mkdtemp(prefix="jarvis-repl-", dir=self.temp_root))
        session = SubprocessReplSession(
            plan=plan,
            python=python,
            worker_source=self._worker_source,
            worker_script=str(WORKER_SCRIPT),
            workdir=workdir,
            limits=limits or self.limits,
            callbacks=callbacks,
            janitor=self._janitor,
            on_close=self._session_closed,
        )
        self._active += 1
        try:
            await session.start()
        except BaseException:
            await session.aclose()
            raise
        return session

    def _session_closed(self) -> None:
        self._active -= 1
