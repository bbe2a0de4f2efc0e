"""``SubprocessReplSession``: one persistent, isolated interpreter for one run.

The session owns a private working directory and, at any time, at most one worker
process. An execution that runs out of time kills the worker; so does a worker that dies
or breaks the protocol. The next execution then starts a fresh worker in the same
directory, restores the host-set variables and reports ``restarted=True``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from jarvis.adapters.subprocess_repl.process import WorkerProcess, WorkerProtocolError
from jarvis.adapters.subprocess_repl.protocol import (
    CallbackReply,
    CallbackRequest,
    ExecuteRequest,
    LlmBatchRequest,
    LlmQueryRequest,
    ReadyMessage,
    ResultMessage,
    SetupMessage,
    SetVariableRequest,
    ToolCallRequest,
    VariableSetMessage,
)
from jarvis.adapters.subprocess_repl.sandbox import SandboxPlan, scrubbed_environment
from jarvis.domain.errors import SandboxError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.repl import ExecutionResult, ReplCallbacks, ReplIsolation, ReplLimits

STARTUP_TIMEOUT = 10.0
_NO_CALLBACKS = (
    "{kind} is not available here: this REPL was started without a connection to a model or tools"
)


class SubprocessReplSession:
    """A :class:`~jarvis.domain.ports.ReplSession` backed by a sandboxed worker process."""

    def __init__(
        self,
        *,
        plan: SandboxPlan,
        command: Sequence[str],
        workdir: Path,
        limits: ReplLimits,
        callbacks: ReplCallbacks | None,
    ) -> None:
        self._plan = plan
        self._command = tuple(command)
        self._workdir = workdir
        self._limits = limits
        self._callbacks = callbacks
        ids: tuple[int, int] | tuple[None, None] = plan.throwaway_ids()
        self._uid: int | None = ids[0]
        self._gid: int | None = ids[1]
        self._worker: WorkerProcess | None = None
        self._variables: dict[str, str] = {}
        self._lost_state = False
        self._closed = False
        self._lock = asyncio.Lock()
        self._ids = 0

    @property
    def isolation(self) -> ReplIsolation:
        return self._plan.isolation

    @property
    def workdir(self) -> Path:
        """The private working directory (removed by :meth:`aclose`)."""
        return self._workdir

    @property
    def worker_pid(self) -> int | None:
        """The host pid of the current worker process (for tests and diagnostics)."""
        return None if self._worker is None else self._worker.pid

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Hand the working directory to the session's user and start the first worker."""
        if self._uid is not None and self._gid is not None:
            await asyncio.to_thread(os.chown, self._workdir, self._uid, self._gid)
        async with self._lock:
            await self._ensure_worker()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.close(grace=0.5)
            await asyncio.to_thread(shutil.rmtree, self._workdir, True)

    async def _ensure_worker(self) -> WorkerProcess:
        if self._worker is not None:
            return self._worker
        worker = await WorkerProcess.spawn(
            self._command, cwd=str(self._workdir), env=scrubbed_environment(str(self._workdir))
        )
        try:
            await worker.send(
                SetupMessage(
                    workdir=str(self._workdir),
                    uid=self._uid,
                    gid=self._gid,
                    allow_fork=self._plan.allow_fork,
                    max_output_chars=self._limits.max_output_chars,
                    cpu_seconds=self._limits.cpu_seconds,
                    session_cpu_seconds=self._limits.session_cpu_seconds,
                    memory_bytes=self._limits.memory_mb * 1024 * 1024,
                    file_size_bytes=self._limits.file_size_mb * 1024 * 1024,
                    max_processes=self._limits.max_processes,
                )
            )
            ready = await worker.receive(timeout=STARTUP_TIMEOUT)
            if not isinstance(ready, ReadyMessage):
                raise WorkerProtocolError(f"expected 'ready', got {ready!r}")
            self._worker = worker
            for name, value in self._variables.items():
                await self._send_variable(worker, name, value)
        except (OSError, TimeoutError, WorkerProtocolError) as exc:
            self._worker = None
            await worker.kill()
            detail = worker.stderr_tail()
            raise SandboxError(
                f"Could not start the isolated Python REPL ({type(exc).__name__}: {exc}).",
                hint=detail or worker.describe_exit(),
            ) from exc
        return worker

    # -- variables -----------------------------------------------------------------------

    async def set_variable(self, name: str, value: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"not a valid variable name: {name!r}")
        if self._closed:
            raise RuntimeError("the REPL session is closed")
        async with self._lock:
            self._variables[name] = value
            worker = await self._ensure_worker()
            try:
                await self._send_variable(worker, name, value)
            except (OSError, TimeoutError, WorkerProtocolError):
                await self._discard_worker()  # restored on the next start

    async def _send_variable(self, worker: WorkerProcess, name: str, value: str) -> None:
        self._ids += 1
        await worker.send(SetVariableRequest(id=self._ids, name=name, value=value))
        reply = await worker.receive(timeout=STARTUP_TIMEOUT)
        if not isinstance(reply, VariableSetMessage) or not reply.ok:
            raise WorkerProtocolError(f"could not set {name!r}: {reply!r}")

    # -- execution -----------------------------------------------------------------------

    async def execute(self, code: str) -> ExecutionResult:
        if self._closed:
            raise RuntimeError("the REPL session is closed")
        async with self._lock:
            restarted = self._lost_state and self._worker is None
            worker = await self._ensure_worker()
            self._lost_state = False
            finished = False
            try:
                result = await self._run(worker, code)
                finished = True
            finally:
                if not finished:  # cancelled mid-execution: the worker is in an unknown state
                    await self._discard_worker()
        if restarted:
            result = replace(result, restarted=True)
        return result

    async def _run(self, worker: WorkerProcess, code: str) -> ExecutionResult:
        loop = asyncio.get_running_loop()
        self._ids += 1
        request_id = self._ids
        started = loop.time()
        host_time = 0.0
        budget = self._limits.timeout_seconds
        try:
            await worker.send(ExecuteRequest(id=request_id, code=code))
            while True:
                remaining = budget - (loop.time() - started - host_time)
                message = await worker.receive(timeout=max(remaining, 0.0))
                if message is None:
                    return await self._crashed(worker, loop.time() - started)
                if isinstance(message, ResultMessage) and message.id == request_id:
                    return _to_result(message)
                if isinstance(message, (LlmQueryRequest, LlmBatchRequest, ToolCallRequest)):
                    answered_at = loop.time()
                    reply = await self._answer(message)
                    host_time += loop.time() - answered_at
                    await worker.send(reply)
                    continue
                raise WorkerProtocolError(f"unexpected message during execution: {message!r}")
        except TimeoutError:
            await self._discard_worker()
            seconds = self._limits.timeout_seconds
            return ExecutionResult(
                error=(
                    f"Execution timed out after {seconds:g} s and the interpreter was stopped. "
                    "The next execution starts a fresh interpreter: every variable and "
                    "import from earlier executions is lost."
                ),
                error_kind="timeout",
                duration_seconds=loop.time() - started,
            )
        except (OSError, WorkerProtocolError) as exc:
            await self._discard_worker()
            return ExecutionResult(
                error=(
                    f"The interpreter broke the protocol and was stopped ({exc}). The next "
                    "execution starts a fresh interpreter: earlier variables are lost."
                ),
                error_kind="crashed",
                duration_seconds=loop.time() - started,
            )

    async def _crashed(self, worker: WorkerProcess, duration: float) -> ExecutionResult:
        await worker.wait_exit(2.0)
        why = worker.describe_exit()
        tail = worker.stderr_tail()
        await self._discard_worker()
        return ExecutionResult(
            error=(
                f"The code ended the interpreter: {why}. The next execution starts a fresh "
                "interpreter: every variable and import from earlier executions is lost."
            ),
            error_kind="crashed",
            traceback=tail[-2000:],
            duration_seconds=duration,
        )

    async def _discard_worker(self) -> None:
        worker, self._worker = self._worker, None
        self._lost_state = True
        if worker is not None:
            await worker.kill()

    async def _answer(self, request: CallbackRequest) -> CallbackReply:
        callbacks = self._callbacks
        if callbacks is None:
            return CallbackReply(
                id=request.id, ok=False, error=_NO_CALLBACKS.format(kind=request.type)
            )
        try:
            if isinstance(request, LlmQueryRequest):
                answer = await callbacks.llm_query(request.prompt)
                return CallbackReply(id=request.id, ok=True, value=str(answer))
            if isinstance(request, LlmBatchRequest):
                answers = await callbacks.llm_batch(request.prompts)
                return CallbackReply(id=request.id, ok=True, value=[str(a) for a in answers])
            arguments: JSONObject = dict(request.arguments)
            outcome = await callbacks.tool_call(request.name, arguments)
            if not outcome.success:
                return CallbackReply(id=request.id, ok=False, error=outcome.content)
            return CallbackReply(id=request.id, ok=True, value=outcome.content)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing callback fails the call in the code, not the run
            return CallbackReply(id=request.id, ok=False, error=f"{type(exc).__name__}: {exc}")


def _to_result(message: ResultMessage) -> ExecutionResult:
    return ExecutionResult(
        stdout=message.stdout,
        stderr=message.stderr,
        value=message.value,
        error=message.error,
        error_kind=message.error_kind,
        traceback=message.traceback,
        final=message.final,
        truncated=message.truncated,
        duration_seconds=message.duration_seconds,
    )
