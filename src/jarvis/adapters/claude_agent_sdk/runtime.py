"""The ``claude_code`` external runtime: the Claude Agent SDK, driven through the runner.

Each run is one ``node runner.mjs`` process (the SDK spawns its ``claude`` binary, 0.6-1.3
s): the request goes in on stdin, the runner's events come back as text deltas and
finished tool calls, its final block as :class:`ExternalRunDone`. By default the SDK talks
to the user's own engine through the Anthropic-compatible endpoint jarvis serves on
loopback (a :class:`LoopbackEndpoint` the composition root provides: started on the first
run, with a random key, stopped by :meth:`ClaudeCodeRuntime.aclose`); with an API key
and no engine, to the vendor's cloud. The SDK's state (sessions, settings) lives in a
private config dir inside jarvis's; the user's HOME and ``~/.claude`` are never read.

Each runner runs in a bubblewrap jail (``subprocess_repl/process_jail.py``) unless the
user opts out: the SDK's tools can write only the workspace and the SDK's state dir, see
neither the home directory nor jarvis's config dir, and die with jarvis, even of
``SIGKILL``, whatever the permission mode lets the model run.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from jarvis.adapters.claude_agent_sdk.install import (
    RUNTIME,
    Node,
    find_node,
    install_runner,
    ready_dir,
)
from jarvis.adapters.claude_agent_sdk.process import OutputTooLarge, RunnerProcess
from jarvis.adapters.claude_agent_sdk.wire import (
    MAX_OUTPUT,
    PERMISSION_MODES,
    OutputReader,
    PermissionMode,
    RunnerRequest,
    RunnerResponse,
    SessionEvent,
    TextDeltaEvent,
    ToolResultEvent,
    ToolUseEvent,
)
from jarvis.adapters.subprocess_repl.process_jail import Confinement
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import (
    ExternalEvent,
    ExternalRunDone,
    ExternalRunRequest,
    ExternalTextDelta,
    ExternalToolDone,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Usage
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolResult

DEFAULT_MAX_TURNS = 30
DEFAULT_PERMISSION_MODE: PermissionMode = "acceptEdits"
"""Edits inside the workspace are accepted without asking (the run is unattended);
anything else that needs permission (shell commands, writes outside) is refused, since
no one is there to approve it. ``-O permission_mode=bypassPermissions`` lifts that."""
SESSION_ID = re.compile(r"[A-Za-z0-9-]{1,128}")


class LoopbackEndpoint(Protocol):
    """jarvis's Anthropic-compatible endpoint over an engine, for the runner to call."""

    async def start(self, engine: InferencePort, model: str) -> tuple[str, str]:
        """``(base_url, api_key)`` of the endpoint serving ``engine`` (started on first use,
        the running one afterwards)."""
        ...

    async def aclose(self) -> None: ...

    def close_now(self) -> None: ...


class ClaudeCodeRuntime:
    """``ExternalRuntimePort`` for the Claude Agent SDK.

    ``install_root``: where the runner is installed (``<config dir>/claude_code_runner``);
    ``state_dir``: the SDK's private config dir (its sessions); ``runner_dir``: a ready
    install to use instead (default: ``$JARVIS_CLAUDE_CODE_RUNNER_DIR``)."""

    def __init__(
        self,
        *,
        install_root: Path,
        state_dir: Path,
        endpoint: LoopbackEndpoint | None = None,
        runner_dir: Path | None = None,
        node_path: str | None = None,
        confine: bool = True,
        hidden: tuple[str, ...] = (),
    ) -> None:
        """``confine`` (``[runtimes] confine``) jails each runner to its workspace unless a
        run opts out; ``hidden`` names more folders it must not see (jarvis's config dir)."""
        self.install_root = install_root
        self._confinement = Confinement(RUNTIME, enabled=confine, hidden=hidden)
        self.state_dir = state_dir
        self.endpoint = endpoint
        self._runner_dir = runner_dir
        self._node_path = node_path
        self._node: Node | None = None
        self._lock = asyncio.Lock()
        self._last_session: dict[str, str] = {}
        self._running: set[RunnerProcess] = set()

    @property
    def runtime_id(self) -> str:
        return RUNTIME

    @property
    def running(self) -> tuple[RunnerProcess, ...]:
        """The runner processes of the runs in progress (tests count them)."""
        return tuple(self._running)

    async def _prepare(self) -> tuple[Node, Path]:
        async with self._lock:
            if self._node is None:
                self._node = await asyncio.to_thread(find_node, self._node_path)
            if self._runner_dir is None:
                ready = ready_dir()
                if ready is None:
                    ready = await asyncio.to_thread(install_runner, self.install_root)
                self._runner_dir = ready
                return self._node, ready
            return self._node, self._runner_dir

    async def _target(self, request: ExternalRunRequest) -> tuple[str, str]:
        """``(base_url, api_key)``: the loopback endpoint over the engine, a given one, or
        the cloud (``""``) with a key."""
        if request.engine is not None and not request.base_url:
            if self.endpoint is None:
                raise ExternalRuntimeError(
                    "No Anthropic-compatible endpoint is configured for claude_code.",
                    runtime=RUNTIME,
                )
            return await self.endpoint.start(request.engine, request.model)
        if not request.api_key:
            raise ConfigurationError(
                "claude_code needs the engine or an Anthropic API key.",
                hint="Run it on your engine (the default), or pass -O cloud=true with "
                "ANTHROPIC_API_KEY set.",
            )
        return request.base_url, request.api_key

    def _session(self, request: ExternalRunRequest) -> str:
        if request.session_id:
            if not SESSION_ID.fullmatch(request.session_id) or not any(
                (self.state_dir / "projects").glob(f"*/{request.session_id}.jsonl")
            ):
                raise ConfigurationError(
                    f"claude_code has no session '{request.session_id[:128]}'.",
                    hint="Drop -O session to start a new one, or pass an id a run reported.",
                )
            return request.session_id
        if request.new_session:
            return ""
        return self._last_session.get(request.workspace, "")

    def _runner_request(
        self, request: ExternalRunRequest, session: str, base_url: str, api_key: str
    ) -> RunnerRequest:
        mode = request.permission_mode or DEFAULT_PERMISSION_MODE
        if mode not in PERMISSION_MODES:
            raise ConfigurationError(
                f"Unknown claude_code permission mode '{mode[:40]}'.",
                hint="Choose one of " + ", ".join(PERMISSION_MODES) + ".",
            )
        if not request.prompt.strip():
            raise ConfigurationError("claude_code needs a non-empty prompt.")
        return RunnerRequest(
            prompt=request.prompt,
            api_key=api_key,
            base_url=base_url,
            workspace=request.workspace,
            allowed_tools=list(request.allowed_tools),
            system_prompt=request.system_prompt,
            session_id=session,
            model=request.model,
            max_turns=min(request.max_turns or DEFAULT_MAX_TURNS, 10_000),
            permission_mode=mode,
            config_dir=str(self.state_dir),
            mcp_servers={},
        )

    async def run(self, request: ExternalRunRequest) -> AsyncIterator[ExternalEvent]:
        if not Path(request.workspace).is_dir():  # noqa: ASYNC240  # one stat
            raise ConfigurationError(f"The workspace '{request.workspace}' is not a directory.")
        session = self._session(request)
        jail = await self._confinement.choose(request.confine)
        node, runner = await self._prepare()
        base_url, api_key = await self._target(request)
        payload = self._runner_request(request, session, base_url, api_key)
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.state_dir.chmod(0o700)  # sessions hold the conversations: the owner's only
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(self.state_dir),
        }
        argv = self._confinement.wrap(
            jail,
            [node.path, str(runner / "runner.mjs")],
            workdir=request.workspace,
            writable=[request.workspace, str(self.state_dir)],
            readable=[node_root(node.path), str(runner), str(runner / "node_modules")],
        )
        process = RunnerProcess(argv, cwd=request.workspace, env=env)
        self._running.add(process)
        try:
            await process.start(payload.model_dump_json().encode())
            reader = OutputReader()
            uses: dict[str, ToolUseEvent] = {}
            try:
                async with asyncio.timeout(request.timeout):
                    async for line in process.stdout_lines():
                        event = reader.feed(line)
                        if isinstance(event, TextDeltaEvent) and event.text:
                            yield ExternalTextDelta(text=event.text)
                        elif isinstance(event, ToolUseEvent):
                            uses[event.id] = event
                        elif isinstance(event, ToolResultEvent):
                            yield ExternalToolDone(result=_tool_result(event, uses))
                        elif isinstance(event, SessionEvent):
                            session = event.session_id or session
                    code = await process.wait()
            except TimeoutError:
                await process.stop()
                raise ExternalRuntimeError(
                    f"claude_code did not finish within {request.timeout:g} s; the run was "
                    "stopped.",
                    runtime=RUNTIME,
                    hint="Raise the limit with -O timeout=SECONDS.",
                ) from None
            except OutputTooLarge:
                await process.stop()
                raise ExternalRuntimeError(
                    f"claude_code's runner wrote more than {MAX_OUTPUT // 2**20} MiB; the run "
                    "was stopped.",
                    runtime=RUNTIME,
                ) from None
            done = self._finish(reader, code, process)
        finally:
            await process.stop()
            self._running.discard(process)
        if done.session_id:
            self._last_session[request.workspace] = done.session_id
        yield replace(done, metadata={**done.metadata, "confined": jail is not None})

    def _finish(self, reader: OutputReader, code: int, process: RunnerProcess) -> ExternalRunDone:
        response = reader.response
        if response is None:
            why = reader.block_error or "without its final block"
            raise ExternalRuntimeError(
                f"claude_code's runner exited ({_exit(code)}) {why}.",
                runtime=RUNTIME,
                hint=process.hint(),
            )
        if code == 2 or response.subtype == "error_input":
            raise ExternalRuntimeError(
                f"claude_code's runner refused the request: {response.error[:500]}",
                runtime=RUNTIME,
            )
        if response.is_error or code != 0:
            kind = response.subtype if response.subtype not in ("", "success") else _exit(code)
            raise ExternalRuntimeError(
                f"claude_code failed ({kind}): {(response.error or response.content)[:1000]}",
                runtime=RUNTIME,
                hint=process.hint(),
            )
        return _done(response)

    def close_now(self) -> None:
        """Stops every run's process tree and the endpoint, from synchronous code."""
        for process in tuple(self._running):
            process.stop_now()
        self._running.clear()
        self._last_session.clear()
        if self.endpoint is not None:
            self.endpoint.close_now()

    async def aclose(self) -> None:
        for process in tuple(self._running):
            await process.stop()
        self._running.clear()
        if self.endpoint is not None:
            await self.endpoint.aclose()


def node_root(node: str) -> str:
    """The installation a jailed ``node`` reads (``<prefix>`` of ``<prefix>/bin/node``)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(node)))


def _exit(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def _tool_result(event: ToolResultEvent, uses: dict[str, ToolUseEvent]) -> ToolResult:
    use = uses.get(event.tool_use_id)
    metadata: JSONObject = {"input": dict(use.input)} if use is not None else {}
    return ToolResult(
        tool_name=use.name if use is not None else "",
        content=event.content,
        success=not event.is_error,
        call_id=event.tool_use_id,
        metadata=metadata,
    )


def _done(response: RunnerResponse) -> ExternalRunDone:
    results = tuple(
        ToolResult(
            tool_name=t.tool_name,
            content=t.content,
            success=not t.is_error,
            call_id=t.tool_use_id,
            metadata={"input": dict(t.input)},
        )
        for t in response.tool_results
    )
    return ExternalRunDone(
        content=response.content,
        session_id=response.session_id,
        tool_results=results,
        turns=max(response.num_turns, 1),
        usage=Usage(
            prompt_tokens=response.usage.input_tokens,
            completion_tokens=response.usage.output_tokens,
        ),
        metadata={"subtype": response.subtype, "num_turns": response.num_turns},
    )
