"""An in-memory external runtime: scripted answers, real session bookkeeping.

It passes the same contract suite as the opencode adapter
(``contracts/external_runtime_contract.py``), so a test of an application that delegates
to ``opencode`` can run without the runtime and still mean something.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import (
    ExternalEvent,
    ExternalRunDone,
    ExternalRunRequest,
    ExternalRuntimePort,
    ExternalTextDelta,
    ExternalToolDone,
)
from jarvis.domain.tools.specs import ToolResult


@dataclass(frozen=True, slots=True)
class ScriptedRun:
    """What one run reports: its tool calls (already run), then its answer."""

    answer: str = "Done."
    tools: tuple[ToolResult, ...] = ()


@dataclass(slots=True)
class InMemoryExternalRuntime:
    """Answers from ``script`` (the last entry repeats) and records every request."""

    runtime_id: str = "opencode"
    script: Sequence[ScriptedRun] = (ScriptedRun(),)
    requests: list[ExternalRunRequest] = field(default_factory=list)
    closed: bool = False
    _sessions: dict[str, list[str]] = field(default_factory=dict)
    _last: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def run(self, request: ExternalRunRequest) -> AsyncIterator[ExternalEvent]:
        if self.closed:
            raise ExternalRuntimeError("The runtime is closed.", runtime=self.runtime_id)
        self.requests.append(request)
        entry = self.script[min(len(self.requests), len(self.script)) - 1]
        if request.session_id:
            if request.session_id not in self._sessions:
                raise ConfigurationError(
                    f"{self.runtime_id} has no session '{request.session_id}'."
                )
            session = request.session_id
        elif request.workspace in self._last and not request.new_session:
            session = self._last[request.workspace]
        else:
            session = f"ses_{next(self._ids)}"
            self._sessions[session] = []
        self._sessions[session].append(request.prompt)
        for result in entry.tools:
            yield ExternalToolDone(result=result)
        words = entry.answer.split(" ")
        for piece in [w + " " for w in words[:-1]] + words[-1:]:
            if piece:
                yield ExternalTextDelta(text=piece)
        self._last[request.workspace] = session
        yield ExternalRunDone(
            content=entry.answer,
            session_id=session,
            tool_results=entry.tools,
            turns=1 + len(entry.tools),
        )

    def prompts(self, session: str) -> list[str]:
        """The prompts a session received, in order."""
        return list(self._sessions.get(session, []))

    async def aclose(self) -> None:
        self.closed = True


@dataclass(slots=True)
class InMemoryExternalRuntimes:
    """``ExternalRuntimesPort`` over in-memory runtimes, by id."""

    runtimes: dict[str, ExternalRuntimePort] = field(default_factory=dict)

    def get(self, runtime_id: str) -> ExternalRuntimePort:
        runtime = self.runtimes.get(runtime_id)
        if runtime is None:
            raise ExternalRuntimeError(
                f"No external runtime named '{runtime_id}'.", runtime=runtime_id
            )
        return runtime


@dataclass(slots=True)
class InMemoryWorkspaceHost:
    """``WorkspaceHostPort`` over a fixed working directory, a set of directories (each
    path to its real path) and an environment."""

    cwd: str = "/work"
    directories: dict[str, str] = field(default_factory=lambda: {"/work": "/work"})
    environment: dict[str, str] = field(default_factory=dict)

    def working_directory(self) -> str:
        return self.cwd

    def real_directory(self, path: str) -> str | None:
        return self.directories.get(path)

    def variable(self, name: str) -> str:
        return self.environment.get(name, "")
