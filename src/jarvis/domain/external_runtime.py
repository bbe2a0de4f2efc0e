"""External agent runtimes (opencode, openhands, claude_code): the port the delegating agents use.

jarvis does not run these agents' loops itself: a runtime of their own (the ``opencode
serve`` process, the openhands SDK in its own Python) plans, calls its tools in the
workspace and talks to the user's engine through the engine's OpenAI-compatible API. The
agent only says what to do and where; the adapter reports what happens as
:data:`ExternalEvent` values, the last one always :class:`ExternalRunDone`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Usage
from jarvis.domain.ports import InferencePort
from jarvis.domain.tools.specs import ToolResult

RuntimeMode = Literal["build", "plan"]
"""``build`` may edit files and run commands in the workspace; ``plan`` only reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalRunRequest:
    """One task for an external runtime.

    ``base_url`` is the engine's OpenAI-compatible base URL (``.../v1``) and ``model`` the
    engine's model name; ``session_id`` continues that session of the runtime (``""``: the
    runtime's last session in this workspace, or a new one when ``new_session``).

    A runtime that speaks another API than the engine's (``claude_code``: Anthropic's) gets
    the ``engine`` itself and reaches it through an endpoint jarvis serves for it; then
    ``base_url`` is empty, or names such an endpoint (``""`` with an ``api_key``: the
    vendor's cloud). ``allowed_tools`` (empty: the runtime's own set), ``max_turns`` (0: the
    runtime's default) and ``permission_mode`` (``""``: the runtime's default) are the
    runtime's own settings, ignored by runtimes without them.

    ``confine``: run the runtime's process tree jailed to the workspace (the default);
    ``False`` is the user's explicit opt-out (its commands then run with the user's full
    rights anywhere).
    """

    prompt: str
    workspace: str
    model: str
    base_url: str
    api_key: str = ""
    mode: RuntimeMode = "build"
    session_id: str = ""
    new_session: bool = False
    system_prompt: str = ""
    timeout: float = 600.0
    allowed_tools: tuple[str, ...] = ()
    max_turns: int = 0
    permission_mode: str = ""
    engine: InferencePort | None = None
    provider_id: str = ""
    """opencode: the provider id its config registers the engine under (``""``: jarvis's)."""
    model_id: str = ""
    """opencode: the model id within that provider (``""``: ``model``). With no
    ``base_url``, a ``provider/model`` id is passed through to opencode's own configuration."""
    confine: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalTextDelta:
    """A piece of the runtime's answer, as its model streamed it."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalToolDone:
    """The runtime finished one of its own tool calls (it already ran it)."""

    result: ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ExternalRunDone:
    """The run is over: the final answer, every tool call, the session to continue."""

    content: str
    session_id: str
    tool_results: tuple[ToolResult, ...] = ()
    turns: int = 1
    usage: Usage = field(default_factory=Usage)
    metadata: JSONObject = field(default_factory=dict)


ExternalEvent: TypeAlias = ExternalTextDelta | ExternalToolDone | ExternalRunDone


class ExternalRuntimePort(Protocol):
    """One external runtime. ``run`` yields events and ends with :class:`ExternalRunDone`;
    a runtime that is missing, fails to start, crashes or times out raises
    :class:`~jarvis.domain.errors.ExternalRuntimeError`. ``aclose`` stops every process
    the runtime started and removes its temporary files."""

    @property
    def runtime_id(self) -> str: ...

    def run(self, request: ExternalRunRequest) -> AsyncIterator[ExternalEvent]: ...

    async def aclose(self) -> None: ...


class ExternalRuntimesPort(Protocol):
    """The runtimes of one application, each started on first use and kept for later runs
    (a second question to ``opencode`` reuses its server)."""

    def get(self, runtime_id: str) -> ExternalRuntimePort:
        """The runtime named ``runtime_id``; an unknown name is an ``ExternalRuntimeError``."""
        ...


class WorkspaceHostPort(Protocol):
    """What a delegated run needs to know about the machine it starts on: the directory
    jarvis was started in, whether a workspace is a directory (and its real path), and the
    few environment variables an external agent reads. The application answers, so the
    domain performs no I/O; it is asked when a run starts, not when the agent is built
    (an operator's agent is checked long before its workspace exists)."""

    def working_directory(self) -> str:
        """The directory jarvis was started in (a workspace's default)."""
        ...

    def real_directory(self, path: str) -> str | None:
        """The real path of ``path`` (symbolic links resolved) when it is a directory,
        else ``None``."""
        ...

    def variable(self, name: str) -> str:
        """The environment variable ``name``; ``""`` when it is not set."""
        ...
