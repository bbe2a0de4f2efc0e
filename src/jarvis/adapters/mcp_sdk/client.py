"""One MCP server through the official ``mcp`` SDK's ``ClientSession``.

Why it is built this way: the SDK's sessions and transports are anyio context managers
whose cancel scopes must be entered and left by the same task. Entering them in the
caller's task (one tool call, one run) and leaving them in another is what makes other
runtimes hang or raise at shutdown. Here one task per server (the *runner*) owns every
context manager from spawn to stop; callers talk to it through a queue of jobs and wait
for their answer on a future, bounded by their own timeout. Whatever happens to a caller
(timeout, cancellation), the runner stays consistent, and whatever happens to the server
(crash, garbage on stdout, endless stderr), every waiting caller gets an ``McpError``.

The stdio transport is jarvis's own (the SDK's ``ClientSession`` runs over it): it gives
the server only :data:`~jarvis.domain.mcp.MCP_SAFE_ENVIRONMENT` plus its configured
variables, starts it in a process group of its own and kills that whole group at the end
(no orphan, even of an ``npx`` child), bounds a line of stdout, keeps only the tail of
stderr, and treats a frame that is not JSON-RPC as a broken server (the MCP spec forbids
anything else on stdout), so a call fails at once instead of waiting for its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import cast

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage

from jarvis.adapters.mcp_sdk.process_group import (
    STOP_GRACE_SECONDS,
    kill_group_and_wait,
    kill_now,
    stop_process_group,
)
from jarvis.adapters.mcp_sdk.sdk_results import call_result, list_tools
from jarvis.application.trace_context import running_span
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.json_types import JSONObject
from jarvis.domain.mcp import (
    MCP_SAFE_ENVIRONMENT,
    McpCallResult,
    McpError,
    McpServerDownError,
    McpServerSpec,
    McpTimeoutError,
    McpToolInfo,
)

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest JSON-RPC frame accepted from a stdio server; a longer one breaks it."""
STDERR_TAIL_BYTES = 4096
"""How much of a server's stderr is kept (for the message when it fails)."""


@dataclass(eq=False)
class _Job:
    """One request for the runner: a tool call, or (``name`` empty) a listing."""

    name: str
    arguments: JSONObject
    future: asyncio.Future[McpCallResult | tuple[McpToolInfo, ...]]
    scope: anyio.CancelScope | None = field(default=None)
    traceparent: str = ""
    """The recorded tool call this is (W3C), sent as ``_meta.traceparent`` (MCP SEP-414)."""

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()


_CLOSE = object()


class McpSdkClient:
    """A ``McpClientPort`` over one server (stdio or streamable HTTP)."""

    def __init__(
        self,
        spec: McpServerSpec,
        *,
        environ: Mapping[str, str] | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._spec = spec
        self._environ = os.environ if environ is None else environ
        self._max_line = max_line_bytes
        self._runner: asyncio.Task[None] | None = None
        self._jobs: asyncio.Queue[_Job | object] = asyncio.Queue()
        self._ready: asyncio.Future[tuple[McpToolInfo, ...]] | None = None
        self._down = ""
        """Why the connection ended, when it ended by itself."""
        self._stderr = bytearray()
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self._scope = anyio.CancelScope()
        self._inflight: set[_Job] = set()

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def spec(self) -> McpServerSpec:
        return self._spec

    @property
    def running(self) -> bool:
        return (
            self._runner is not None
            and not self._runner.done()
            and self._ready is not None
            and self._ready.done()
            and not self._ready.cancelled()
            and self._ready.exception() is None
            and not self._down
        )

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while it runs (tests check the process table)."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    # --- the callers' side ----------------------------------------------------------------

    async def start(self) -> tuple[McpToolInfo, ...]:
        # the SDK logs a server's bad reply with its traceback; jarvis reports each fault
        # itself (one line, the server's text filtered), so the SDK's own log stays silent
        logging.getLogger("mcp").setLevel(logging.CRITICAL + 1)
        if self.running:
            listed = await self._submit("", {}, self._spec.startup_timeout, "listing its tools")
            assert isinstance(listed, tuple)
            return listed
        await self.aclose()
        self._closing = False
        self._down = ""
        self._stderr.clear()
        self._jobs = asyncio.Queue()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[McpToolInfo, ...]] = loop.create_future()
        ready.add_done_callback(_retrieved)  # its failure is raised by start, or moot
        self._ready = ready
        self._runner = loop.create_task(self._run(ready), name=f"mcp-server-{self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self._spec.startup_timeout)
        except TimeoutError:
            await self.aclose()
            raise McpTimeoutError(
                f"MCP server '{self.name}' did not start within "
                f"{self._spec.startup_timeout:g} s (startup_timeout).",
                server=self.name,
                hint=self._stderr_hint(),
            ) from None
        except asyncio.CancelledError:
            await self.aclose()
            raise
        except McpError:
            await self.aclose()
            raise

    async def call_tool(self, name: str, arguments: JSONObject, *, timeout: float) -> McpCallResult:
        result = await self._submit(name, arguments, timeout, f"'{name}'")
        assert isinstance(result, McpCallResult)
        return result

    async def _submit(
        self, name: str, arguments: JSONObject, timeout: float, what: str
    ) -> McpCallResult | tuple[McpToolInfo, ...]:
        if not self.running:
            raise McpServerDownError(
                f"MCP server '{self.name}' is not running"
                + (f" ({self._down})." if self._down else "."),
                server=self.name,
                hint=self._stderr_hint(),
            )
        future: asyncio.Future[McpCallResult | tuple[McpToolInfo, ...]] = (
            asyncio.get_running_loop().create_future()
        )
        span = running_span() if name else None
        job = _Job(name, arguments, future, traceparent="" if span is None else span.header())
        self._jobs.put_nowait(job)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            job.cancel()
            future.cancel()
            raise McpTimeoutError(
                f"MCP server '{self.name}' did not answer {what} within {timeout:g} s.",
                server=self.name,
            ) from None
        except asyncio.CancelledError:
            job.cancel()
            future.cancel()
            raise

    async def aclose(self) -> None:
        runner = self._runner
        if runner is None:
            return
        self._closing = True
        if not runner.done():
            if self._ready is not None and not self._ready.done():
                # still starting, so reading no job: cancel its scope (an anyio cancellation,
                # which leaves the shielded stop of the process alone; a native
                # ``task.cancel()`` would interrupt it)
                self._scope.cancel()
            self._jobs.put_nowait(_CLOSE)
            done, _ = await asyncio.wait({runner}, timeout=STOP_GRACE_SECONDS)
            if not done:
                runner.cancel()
                await asyncio.wait({runner}, timeout=3 * STOP_GRACE_SECONDS)
        self._runner = None
        process = self._process
        if process is not None:  # the runner could not stop it (cancelled twice): kill now
            await kill_group_and_wait(process)
            self._process = None

    def close_now(self) -> None:
        self._closing = True
        self._down = self._down or "it was stopped"
        process = self._process
        if process is not None:
            kill_now(process)  # returns once it died: no server outlives a close that returned
        self._runner = None  # its loop ends it, or is gone with it

    def _stderr_hint(self) -> str:
        tail = self.stderr_tail().strip()
        if not tail:
            return ""
        last = tail.splitlines()[-3:]
        return "Its stderr ended with: " + " | ".join(line.strip() for line in last)[-400:]

    # --- the runner -----------------------------------------------------------------------

    async def _run(self, ready: asyncio.Future[tuple[McpToolInfo, ...]]) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with (
                    self._transport() as (read, write),
                    ClientSession(
                        read,
                        write,
                        client_info=types.Implementation(name="jarvis", version="1"),
                    ) as session,
                ):
                    await session.initialize()
                    tools = await list_tools(session)
                    if not ready.done():
                        ready.set_result(tools)
                    await self._serve(session)
            if scope.cancelled_caught and not self._down:
                self._down = "it stopped"
        except Exception as exc:
            self._down = self._down or _describe(exc)
        finally:
            reason = self._down or "it stopped"
            if not ready.done():
                ready.set_exception(
                    McpServerDownError(
                        f"MCP server '{self.name}' could not start: {reason}.",
                        server=self.name,
                        hint=self._stderr_hint(),
                    )
                )
            self._fail_pending(reason)

    def _fail_pending(self, reason: str) -> None:
        """Fail the calls still waiting: only now, once the server's process is gone."""
        for job in self._inflight:
            if not job.future.done():
                job.future.set_exception(self._down_error(reason))
        self._inflight.clear()
        while not self._jobs.empty():
            queued = self._jobs.get_nowait()
            if isinstance(queued, _Job) and not queued.future.done():
                queued.future.set_exception(self._down_error(reason))

    def _down_error(self, reason: str) -> McpServerDownError:
        return McpServerDownError(
            f"MCP server '{self.name}' is down: {reason}.",
            server=self.name,
            hint=self._stderr_hint(),
        )

    def _broken(self, reason: str) -> None:
        """The server broke (exited, garbage on stdout): end the whole connection now."""
        if not self._down and not self._closing:
            self._down = reason
        self._scope.cancel()

    async def _serve(self, session: ClientSession) -> None:
        async with anyio.create_task_group() as group:
            while True:
                job = await self._jobs.get()
                if not isinstance(job, _Job):
                    group.cancel_scope.cancel()
                    return
                if not job.future.done():
                    self._inflight.add(job)
                    group.start_soon(self._answer, session, job)

    async def _answer(self, session: ClientSession, job: _Job) -> None:
        with anyio.CancelScope() as scope:
            job.scope = scope
            try:
                outcome: McpCallResult | tuple[McpToolInfo, ...]
                if job.name:
                    meta = {"traceparent": job.traceparent} if job.traceparent else None
                    result = await session.call_tool(
                        job.name,
                        dict(job.arguments),
                        meta=cast("types.RequestParamsMeta | None", meta),
                    )
                    outcome = call_result(result)
                else:
                    outcome = await list_tools(session)
                if not job.future.done():
                    job.future.set_result(outcome)
            except Exception as exc:
                if not job.future.done():
                    job.future.set_exception(
                        McpError(
                            f"MCP server '{self.name}' failed {job.name or 'listing'}: "
                            f"{_describe(exc)}",
                            server=self.name,
                        )
                    )
        self._inflight.discard(job)

    # --- transports -----------------------------------------------------------------------

    def _transport(
        self,
    ) -> contextlib.AbstractAsyncContextManager[
        tuple[
            anyio.streams.memory.MemoryObjectReceiveStream[SessionMessage | Exception],
            anyio.streams.memory.MemoryObjectSendStream[SessionMessage],
        ]
    ]:
        if self._spec.url:
            return self._http()
        return self._stdio()

    @asynccontextmanager
    async def _http(
        self,
    ) -> AsyncIterator[
        tuple[
            anyio.streams.memory.MemoryObjectReceiveStream[SessionMessage | Exception],
            anyio.streams.memory.MemoryObjectSendStream[SessionMessage],
        ]
    ]:
        from mcp.client.streamable_http import streamable_http_client

        from jarvis.adapters.mcp_sdk.bounded_http import BoundedClient

        client = BoundedClient(headers=self._spec.headers, max_bytes=self._max_line)
        async with client, streamable_http_client(self._spec.url, http_client=client) as streams:
            read, write = streams
            yield (
                cast(
                    "anyio.streams.memory.MemoryObjectReceiveStream[SessionMessage | Exception]",
                    read,
                ),
                cast("anyio.streams.memory.MemoryObjectSendStream[SessionMessage]", write),
            )

    def _environment(self) -> dict[str, str]:
        env = {key: self._environ[key] for key in MCP_SAFE_ENVIRONMENT if key in self._environ}
        env.update(self._spec.env)
        return env

    @asynccontextmanager
    async def _stdio(
        self,
    ) -> AsyncIterator[
        tuple[
            anyio.streams.memory.MemoryObjectReceiveStream[SessionMessage | Exception],
            anyio.streams.memory.MemoryObjectSendStream[SessionMessage],
        ]
    ]:
        spec = self._spec
        try:
            process = await asyncio.create_subprocess_exec(
                spec.command,
                *spec.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._environment(),
                cwd=spec.cwd or None,
                start_new_session=True,
                limit=self._max_line,
            )
        except (OSError, ValueError) as exc:
            self._down = (
                f"cannot run {spec.command!r} ({exc.strerror or exc})"
                if isinstance(exc, OSError)
                else f"cannot run {spec.command!r} ({exc})"
            )
            raise
        self._process = process
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as pumps:
                pumps.start_soon(self._pump_stdout, process, read_send)
                pumps.start_soon(self._pump_stdin, process, write_receive)
                pumps.start_soon(self._drain_stderr, process)
                pumps.start_soon(self._watch_exit, process)
                try:
                    yield read_receive, write_send
                finally:
                    pumps.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._stop(process)
                for stream in (read_send, read_receive, write_send, write_receive):
                    await stream.aclose()

    async def _pump_stdout(
        self,
        process: asyncio.subprocess.Process,
        sink: anyio.streams.memory.MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdout is not None
        while True:
            try:
                line = await process.stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return  # end of stream: the exit watcher reports it
            except asyncio.LimitOverrunError:
                self._broken(f"it sent a frame longer than {self._max_line} bytes")
                return
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                shown = masked_prefix(line[:480].decode("utf-8", "replace").strip(), 120)
                return self._broken(f"it sent a malformed frame on stdout: {shown!r}")
            try:
                await sink.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

    async def _pump_stdin(
        self,
        process: asyncio.subprocess.Process,
        source: anyio.streams.memory.MemoryObjectReceiveStream[SessionMessage],
    ) -> None:
        assert process.stdin is not None
        async for item in source:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            try:
                process.stdin.write(data.encode("utf-8"))
                await process.stdin.drain()
            except (ConnectionError, OSError):
                self._broken("its stdin closed")
                return

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(65536):
            self._stderr += chunk
            if len(self._stderr) > STDERR_TAIL_BYTES:
                del self._stderr[: len(self._stderr) - STDERR_TAIL_BYTES]

    async def _watch_exit(self, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        await asyncio.sleep(0)  # let the stderr drain take what the server wrote last
        self._broken(f"its process exited with code {code}")

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        await stop_process_group(process)
        self._process = None


def _retrieved(future: asyncio.Future[tuple[McpToolInfo, ...]]) -> None:
    if not future.cancelled():
        future.exception()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, BaseExceptionGroup):
        inner = [_describe(e) for e in exc.exceptions]
        text = "; ".join(inner) or text
    return masked_prefix(text, 500)
