"""``SubprocessReplSession``: one persistent, isolated interpreter for one run.

The session owns a private working directory, a cgroup where the host may create one,
and, at any time, at most one worker (in the bubblewrap plans: one sandbox). An execution
that runs out of time kills the worker; so does a worker that dies or breaks the protocol.
The next execution then starts a fresh worker in the same directory, restores the
host-set variables and reports ``restarted=True``. Closing the session kills everything
and removes the directory and the cgroup; the factory's reaper does the same if the host
dies first.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from jarvis.adapters.subprocess_repl.bwrap import SANDBOX_WORKDIR, SANDBOX_WORKER
from jarvis.adapters.subprocess_repl.cgroup import SessionCgroup
from jarvis.adapters.subprocess_repl.janitor import Janitor
from jarvis.adapters.subprocess_repl.memory_watch import directory_bytes
from jarvis.adapters.subprocess_repl.process import (
    FRESH_ROOM,
    WorkerProcess,
    WorkerProtocolError,
)
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
from jarvis.adapters.subprocess_repl.reaper import remove_tree
from jarvis.adapters.subprocess_repl.sandbox import SandboxPlan, pipe_with, scrubbed_environment
from jarvis.domain.errors import SandboxError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.repl import ExecutionResult, ReplCallbacks, ReplIsolation, ReplLimits

STARTUP_TIMEOUT = 10.0
_log = logging.getLogger(__name__)
_NO_CALLBACKS = (
    "{kind} is not available here: this REPL was started without a connection to a model or tools"
)


class SubprocessReplSession:
    """A :class:`~jarvis.domain.ports.ReplSession` backed by a sandboxed worker process."""

    def __init__(
        self,
        *,
        plan: SandboxPlan,
        python: str,
        worker_source: bytes,
        worker_script: str,
        workdir: Path,
        limits: ReplLimits,
        callbacks: ReplCallbacks | None,
        janitor: Janitor | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._on_close = on_close
        self._plan = plan
        self._python = python
        self._worker_source = worker_source
        self._worker_script = worker_script
        self._workdir = workdir
        self._janitor = janitor
        self._cgroup: SessionCgroup | None = None
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
        self._callbacks_made = 0
        self._callback_bytes = 0

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

    @property
    def cgroup(self) -> SessionCgroup | None:
        """The session's cgroup, when the host could create one."""
        return self._cgroup

    @property
    def _sandboxed(self) -> bool:
        return self._plan.bwrap is not None

    async def start(self) -> None:
        """Hand the working directory to the session's user, make its cgroup, start the
        first worker."""
        if self._janitor is not None:
            self._janitor.add_directory(str(self._workdir))
        if self._uid is not None and self._gid is not None:
            await asyncio.to_thread(os.chown, self._workdir, self._uid, self._gid)
        layout = self._plan.cgroups
        if layout is not None:
            cgroup = SessionCgroup(layout)
            try:
                await asyncio.to_thread(
                    cgroup.create,
                    memory_bytes=self._limits.memory_mb * 1024 * 1024,
                    max_processes=self._limits.max_processes + 2,  # + bwrap and its init
                )
            except OSError as exc:
                await asyncio.to_thread(_remove_cgroup, cgroup)
                raise SandboxError(
                    f"Could not create the REPL session's cgroup ({exc}).",
                    hint="The memory and process limits of the session need it.",
                ) from exc
            self._cgroup = cgroup
            if self._janitor is not None:
                for directory in cgroup.directories:
                    self._janitor.add_cgroup(str(directory))
        async with self._lock:
            await self._ensure_worker()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
        async with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.close(grace=0.5)
            cgroup, self._cgroup = self._cgroup, None
            removed = cgroup is not None and await asyncio.to_thread(_remove_cgroup, cgroup)
            if removed and cgroup is not None and self._janitor is not None:
                for directory in cgroup.directories:
                    self._janitor.remove_cgroup(str(directory))
            try:
                await asyncio.to_thread(remove_tree, str(self._workdir))
            except OSError as exc:
                # loud: a directory left behind is a defect the user must hear about; the
                # reaper tries again when the host exits
                _log.error("The REPL's working directory was not removed: %s", exc)
            else:
                if self._janitor is not None:
                    self._janitor.remove_directory(str(self._workdir))

    def _command(self, worker_fd: int | None, seccomp_fd: int | None) -> list[str]:
        interpreter = [self._python, "-I", "-S", "-B"]
        if worker_fd is None:
            return [*interpreter, self._worker_script]
        prefix = self._plan.sandbox_prefix(
            workdir=str(self._workdir), worker_fd=worker_fd, seccomp_fd=seccomp_fd
        )
        return [*prefix, *interpreter, SANDBOX_WORKER]

    async def _spawn(self) -> WorkerProcess:
        if not self._sandboxed:
            return await WorkerProcess.spawn(
                self._command(None, None),
                cwd=str(self._workdir),
                env=scrubbed_environment(str(self._workdir)),
            )
        fds = [pipe_with(self._worker_source)]
        seccomp = self._plan.seccomp
        if seccomp is not None:
            fds.append(pipe_with(seccomp))
        try:
            return await WorkerProcess.spawn(
                self._command(fds[0], fds[1] if len(fds) > 1 else None),
                cwd="/",
                env=scrubbed_environment(SANDBOX_WORKDIR),
                pass_fds=fds,
                user=self._uid,
                sandboxed=True,
            )
        finally:
            for fd in fds:
                os.close(fd)

    async def _ensure_worker(self) -> WorkerProcess:
        if self._worker is not None:
            return self._worker
        worker = await self._spawn()
        sandboxed = self._sandboxed
        try:
            await worker.send(
                SetupMessage(
                    workdir=SANDBOX_WORKDIR if sandboxed else str(self._workdir),
                    uid=None if sandboxed else self._uid,
                    gid=None if sandboxed else self._gid,
                    allow_fork=self._plan.allow_fork,
                    sandboxed=sandboxed,
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
            # no code has run yet: the whole tree joins the session's cgroup now
            tree = worker.hold_namespace()
            if self._cgroup is not None:
                await asyncio.to_thread(self._cgroup.adopt_tree, tree[0])
            else:  # no cgroup: the session's memory is bounded by sampling it
                worker.watch_memory(
                    limit_bytes=self._limits.memory_mb * 1024 * 1024,
                    max_processes=self._limits.max_processes,
                    workdir=str(self._workdir),
                )
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
                    left = self._limits.callback_seconds - host_time
                    try:
                        reply = await asyncio.wait_for(self._budgeted(message), max(left, 0.0))
                    except TimeoutError:
                        host_time = self._limits.callback_seconds
                        raise
                    host_time += loop.time() - answered_at
                    await worker.send(reply)
                    continue
                raise WorkerProtocolError(f"unexpected message during execution: {message!r}")
        except TimeoutError:
            await self._discard_worker()
            seconds = self._limits.timeout_seconds
            if host_time >= self._limits.callback_seconds:
                seconds = self._limits.callback_seconds
                what = "its llm_query/llm_batch/tool_call calls took more than"
            else:
                what = "timed out after"
            return ExecutionResult(
                error=(
                    f"Execution {what} {seconds:g} s and the interpreter was stopped. "
                    "The next execution starts a fresh interpreter: every variable and "
                    "import from earlier executions is lost."
                ),
                error_kind="timeout",
                duration_seconds=loop.time() - started,
            )
        except (OSError, WorkerProtocolError) as exc:
            if worker.memory_exceeded is not None:  # stopped while no code was running
                return await self._crashed(worker, loop.time() - started)
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
        emptied = ""
        limit = self._limits.memory_mb * 1024 * 1024
        files = 0
        if worker.memory_exceeded is not None:  # the sandbox is gone: nothing races the walk
            files = await asyncio.to_thread(directory_bytes, str(self._workdir), limit)
        if files > max(limit - FRESH_ROOM, 0):
            await asyncio.to_thread(self._empty_workdir)
            emptied = (
                f" Its working directory held {files // (1024 * 1024)} MB of files, more "
                "than a fresh interpreter would have room for beside them: it was emptied."
            )
        return ExecutionResult(
            error=(
                f"The code ended the interpreter: {why}. The next execution starts a fresh "
                "interpreter: every variable and import from earlier executions is lost." + emptied
            ),
            error_kind="crashed" if worker.memory_exceeded is None else "memory_limit",
            traceback=tail[-2000:],
            duration_seconds=duration,
        )

    def _empty_workdir(self) -> None:
        """Remove everything in the working directory (kept itself, with its owner)."""
        try:
            names = os.listdir(self._workdir)
        except OSError as exc:
            _log.error("The REPL's working directory could not be emptied: %s", exc)
            return
        for name in names:
            try:
                remove_tree(os.path.join(self._workdir, name))
            except OSError as exc:
                _log.error("The REPL's working directory could not be emptied: %s", exc)

    async def _discard_worker(self) -> None:
        worker, self._worker = self._worker, None
        self._lost_state = True
        if worker is not None:
            await worker.kill()

    async def _budgeted(self, request: CallbackRequest) -> CallbackReply:
        """The answer, within the session's callback budget (count and bytes)."""
        limits = self._limits
        self._callbacks_made += 1
        self._callback_bytes += len(request.model_dump_json())
        if self._callbacks_made > limits.max_callbacks:
            return CallbackReply(
                id=request.id,
                ok=False,
                error=f"callback budget exhausted: at most {limits.max_callbacks} "
                "llm_query/llm_batch/tool_call calls per session",
            )
        if self._callback_bytes > limits.max_callback_bytes:
            return CallbackReply(
                id=request.id,
                ok=False,
                error=f"callback budget exhausted: at most {limits.max_callback_bytes:,} "
                "bytes of prompts, arguments and answers per session",
            )
        reply = await self._answer(request)
        self._callback_bytes += len(reply.model_dump_json())
        return reply

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


def _remove_cgroup(cgroup: SessionCgroup) -> bool:
    try:
        cgroup.remove()
    except OSError as exc:
        _log.error("The REPL session's cgroup was not removed: %s", exc)
        return False
    return True
