"""``SubprocessRepl``: the :class:`~jarvis.domain.ports.ReplPort` that starts sandboxed
worker processes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from jarvis.adapters.subprocess_repl.sandbox import (
    NetworkMode,
    SandboxPlan,
    choose_interpreter,
    plan_sandbox,
)
from jarvis.adapters.subprocess_repl.session import SubprocessReplSession
from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits

WORKER_SCRIPT = Path(__file__).with_name("worker.py")


class SubprocessRepl:
    """Starts one isolated interpreter per session.

    ``python`` is the interpreter to run the code with, started with ``-I -S -B``: standard
    library only, none of jarvis's site-packages (default: the running interpreter, or
    another one whose standard library the sandbox user can read, see
    :func:`~jarvis.adapters.subprocess_repl.sandbox.choose_interpreter`). ``network``
    chooses the sandbox plan (see :mod:`jarvis.adapters.subprocess_repl.sandbox`); the plan
    is found on first use and kept.
    ``limits`` are the defaults for sessions started without their own.
    """

    def __init__(
        self,
        *,
        limits: ReplLimits | None = None,
        network: NetworkMode = "auto",
        python: str | None = None,
        temp_root: str | None = None,
    ) -> None:
        self.limits = limits or ReplLimits()
        self.network: NetworkMode = network
        self._python = python
        self.temp_root = temp_root
        self._plan: SandboxPlan | None = None

    def plan(self) -> SandboxPlan:
        """The sandbox plan in force (probed on first call)."""
        if self._plan is None:
            self._plan = plan_sandbox(self.network)
        return self._plan

    @property
    def python(self) -> str:
        """The interpreter the worker runs on (probed on first use)."""
        if self._python is None:
            self._python = choose_interpreter(self.plan())
        return self._python

    def isolation(self) -> ReplIsolation:
        return self.plan().isolation

    def command(self) -> tuple[str, ...]:
        """The full command line of a worker."""
        return (*self.plan().prefix, self.python, "-I", "-S", "-B", str(WORKER_SCRIPT))

    async def start(
        self,
        *,
        callbacks: ReplCallbacks | None = None,
        limits: ReplLimits | None = None,
    ) -> SubprocessReplSession:
        plan = self.plan()
        workdir = Path(tempfile.mkdtemp(prefix="jarvis-repl-", dir=self.temp_root))
        session = SubprocessReplSession(
            plan=plan,
            command=self.command(),
            workdir=workdir,
            limits=limits or self.limits,
            callbacks=callbacks,
        )
        try:
            await session.start()
        except BaseException:
            await session.aclose()
            raise
        return session
