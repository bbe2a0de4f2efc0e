"""``opencode``, ``openhands`` and ``claude_code``: hand the question to an external coding agent.

The runtime (see :mod:`jarvis.domain.external_runtime`) runs its own loop and its own tools
in the workspace, on the user's engine: the agent derives the engine's OpenAI-compatible
base URL (Ollama's ``/v1``, a vLLM or OpenAI-compatible server as configured) and passes
it with the model. The embedded engine has no HTTP API of its own, so these agents refuse
it with a message saying what to do instead.

Options: ``workspace`` (default: the current directory), ``agent`` (opencode and
openhands: ``build`` or ``plan``), ``session`` (continue that session; default: the
runtime's last session in the workspace), ``new_session`` (start afresh), ``timeout``
(seconds), ``base_url`` (the engine's OpenAI-compatible URL, when it cannot be derived),
``api_key`` (for that URL), ``confine`` (default ``true``: the runtime's processes are
jailed to the workspace; ``false`` runs them with the user's full rights anywhere).

``claude_code`` speaks Anthropic's API, so it needs no OpenAI-compatible URL: it gets the
engine itself and the runtime serves it an Anthropic-compatible endpoint on loopback (any
engine, the embedded one too). Its own options are listed on :class:`ClaudeCodeAgent`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import ClassVar, Self

from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import (
    ExternalRunDone,
    ExternalRunRequest,
    ExternalRuntimesPort,
    ExternalTextDelta,
    ExternalToolDone,
    RuntimeMode,
    WorkspaceHostPort,
)
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.updates import RunFinished, RunUpdate, TextDelta, ToolResultReady

MODES: tuple[RuntimeMode, ...] = ("build", "plan")


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegatedRun:
    """Where and how a delegated run goes: the ``workspace`` (``""``: the directory jarvis
    was started in, asked of the host when the run starts), the runtime's ``mode``, the
    session to continue (``""``: the runtime's last one there, unless ``new_session``),
    the ``timeout`` in seconds, a turn limit (0: the runtime's own) and whether the
    runtime's processes are jailed to the workspace (``confine``)."""

    workspace: str = ""
    mode: RuntimeMode = "build"
    session_id: str = ""
    new_session: bool = False
    timeout: float = 600.0
    max_turns: int = 0
    confine: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineEndpoint:
    """The engine endpoint the runtime's model calls go to (``""``: none given)."""

    base_url: str = ""
    api_key: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeCodeSettings:
    """Claude Code's own settings: the only tools it may use (empty: the SDK's set), its
    permission mode, and ``cloud`` (Anthropic's cloud instead of the user's engine)."""

    allowed_tools: tuple[str, ...] = ()
    permission_mode: str = "acceptEdits"
    cloud: bool = False


def openai_base_url(inference: InferencePort) -> str:
    """The engine's OpenAI-compatible base URL: Ollama serves one under ``/v1``; vLLM and
    OpenAI-compatible engines are configured with theirs. ``""`` when there is none."""
    url = inference.base_url.rstrip("/")
    if not url:
        return ""
    if inference.engine_id == "ollama" and not url.endswith("/v1"):
        return url + "/v1"
    return url


class ExternalRuntimeAgent(BaseAgent):
    """Delegates the whole run to the external runtime named :attr:`runtime_id`."""

    agent_id: ClassVar[str] = "external"
    runtime_id: ClassVar[str] = ""
    accepts_tools: ClassVar[bool] = False
    modes: ClassVar[tuple[RuntimeMode, ...]] = ("build",)
    default_timeout: ClassVar[float] = 600.0
    takes_max_turns: ClassVar[bool] = False
    """Whether the runtime honours a turn limit (``-O max_turns=N``); where it does not,
    the option is refused rather than ignored."""

    def __init__(self, parts: AgentParts, *, run: DelegatedRun, endpoint: EngineEndpoint) -> None:
        super().__init__(
            parts.inference,
            parts.model,
            sampling=parts.sampling,
            prompts=parts.prompts,
            bus=parts.bus,
        )
        self.runtimes: ExternalRuntimesPort | None = parts.runtimes
        self.host: WorkspaceHostPort | None = parts.host
        self.workspace = run.workspace
        self.mode = run.mode
        self.session_id = run.session_id
        self.new_session = run.new_session
        self.timeout = run.timeout
        self.max_turns = run.max_turns
        self.confine = run.confine
        self.base_url = endpoint.base_url
        self.api_key = endpoint.api_key

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        return cls(
            parts,
            run=cls.delegated_run(options, choose_mode=True),
            endpoint=EngineEndpoint(
                base_url=options.text("base_url", None) or openai_base_url(parts.inference),
                api_key=options.text("api_key", None) or "",
            ),
        )

    @classmethod
    def delegated_run(cls, options: AgentOptions, *, choose_mode: bool) -> DelegatedRun:
        """The run's settings from ``-O`` options, read once for every runtime: ``agent``
        (the mode) only where ``choose_mode``, ``max_turns`` only where
        :attr:`takes_max_turns` (elsewhere the option is refused as unknown)."""
        timeout = options.number("timeout", cls.default_timeout)
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        max_turns = options.integer("max_turns", 0) if cls.takes_max_turns else 0
        if max_turns < 0:
            raise ValueError("max_turns must not be negative")
        return DelegatedRun(
            workspace=options.text("workspace", None) or "",
            mode=options.choice("agent", cls.modes, cls.modes[0], what="mode")
            if choose_mode
            else "build",
            session_id=options.text("session", None) or "",
            new_session=options.flag("new_session", False),
            timeout=timeout,
            max_turns=max_turns,
            confine=options.flag("confine", True),
        )

    def _host(self) -> WorkspaceHostPort:
        if self.host is None:
            raise ConfigurationError(
                f"The {self.runtime_id} agent was built without a workspace host.",
                hint="Build it through the agent registry, which supplies the local one.",
            )
        return self.host

    def resolved_workspace(self) -> str:
        """The workspace's real path (default: the directory jarvis was started in); one
        that is not a directory is a ``ConfigurationError``."""
        host = self._host()
        workspace = self.workspace or host.working_directory()
        resolved = host.real_directory(workspace)
        if resolved is None:
            raise ConfigurationError(f"The workspace '{workspace}' is not a directory.")
        return resolved

    def passes_through(self) -> bool:
        """Whether a run without an engine URL is left to the runtime's own configuration."""
        return False

    def _request(self, input: str) -> ExternalRunRequest:
        if not self.base_url and not self.passes_through():
            raise ConfigurationError(
                f"The {self.runtime_id} agent needs an engine with an OpenAI-compatible API; "
                f"the {self.inference.engine_id} engine has none.",
                hint="Use --engine ollama, vllm or openai (for example a llama.cpp server), "
                f"or pass -O base_url=http://HOST:PORT/v1. The embedded engine is not "
                f"supported by {self.runtime_id} yet.",
            )
        endpoint = EngineEndpoint(base_url=self.base_url, api_key=self.api_key)
        return self._run_request(input, self.resolved_workspace(), endpoint, self.model)

    def _run_request(
        self, input: str, workspace: str, endpoint: EngineEndpoint, model: str
    ) -> ExternalRunRequest:
        """The request with this agent's run settings, for the engine a runtime reaches
        at ``endpoint`` with ``model``."""
        return ExternalRunRequest(
            prompt=input,
            workspace=workspace,
            model=model,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            mode=self.mode,
            session_id=self.session_id,
            new_session=self.new_session,
            system_prompt=self.effective_system_prompt()
            if self.prompts.system_prompt or self.prompts.persona_prompt
            else "",
            timeout=self.timeout,
            max_turns=self.max_turns,
            confine=self.confine,
        )

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        result: AgentResult | None = None
        async for update in self.astream(input, context):
            if isinstance(update, RunFinished):
                result = update.result
        if result is None:  # astream always ends with RunFinished
            raise ExternalRuntimeError("The runtime reported no result.", runtime=self.runtime_id)
        return result

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        request = self._request(input)
        if self.runtimes is None:
            raise ExternalRuntimeError(
                f"No external runtimes are configured for the {self.runtime_id} agent.",
                runtime=self.runtime_id,
            )
        runtime = self.runtimes.get(self.runtime_id)
        self.run_started(input)
        done: ExternalRunDone | None = None
        async for event in runtime.run(request):
            if isinstance(event, ExternalTextDelta):
                yield TextDelta(text=event.text)
            elif isinstance(event, ExternalToolDone):
                yield ToolResultReady(result=event.result)
            else:
                done = event
        if done is None:
            raise ExternalRuntimeError(
                f"{self.runtime_id} ended without a result.", runtime=self.runtime_id
            )
        result = AgentResult(
            content=done.content,
            stop_reason="final_answer",
            tool_results=done.tool_results,
            turns=done.turns,
            usage=done.usage,
            model=self.model,
            metadata={
                **done.metadata,
                "runtime": self.runtime_id,
                "session_id": done.session_id,
                "workspace": request.workspace,
                "mode": request.mode,
            },
        )
        self.run_ended(result)
        yield RunFinished(result=result)


class OpenCodeAgent(ExternalRuntimeAgent):
    """The opencode agent (``opencode serve``), ``build`` or ``plan``.

    ``provider_id`` / ``model_id`` name the engine's provider and model in opencode's
    config (default ``jarvis`` and the run's model). Pass-through: when the engine has no
    OpenAI-compatible URL and the model is ``provider/model``, no provider is written and
    opencode resolves that model from its own configuration."""

    agent_id: ClassVar[str] = "opencode"
    runtime_id: ClassVar[str] = "opencode"
    modes: ClassVar[tuple[RuntimeMode, ...]] = MODES
    provider_id: str = ""
    model_id: str = ""

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        agent = super().from_options(parts, options)
        agent.provider_id = options.text("provider_id", None) or ""
        agent.model_id = options.text("model_id", None) or ""
        if any(c in agent.provider_id for c in "/ \t\n"):
            raise ValueError("provider_id is a plain name (no '/' or spaces)")
        return agent

    def passes_through(self) -> bool:
        provider, _, model = (self.model_id or self.model).partition("/")
        return bool(provider and model)

    def _request(self, input: str) -> ExternalRunRequest:
        return replace(
            super()._request(input), provider_id=self.provider_id, model_id=self.model_id
        )


class OpenHandsAgent(ExternalRuntimeAgent):
    """The openhands SDK's agent, run in a Python of its own: ``build`` (terminal and file
    editor) or ``plan`` (read-only search, nothing that writes or runs commands)."""

    agent_id: ClassVar[str] = "openhands"
    runtime_id: ClassVar[str] = "openhands"
    modes: ClassVar[tuple[RuntimeMode, ...]] = MODES
    default_timeout: ClassVar[float] = 900.0
    takes_max_turns: ClassVar[bool] = True


CLAUDE_PERMISSION_MODES = ("acceptEdits", "default", "plan", "dontAsk", "bypassPermissions")


class ClaudeCodeAgent(ExternalRuntimeAgent):
    """The Claude Agent SDK's agent (Claude Code), on the user's engine by default.

    Options besides ``workspace``, ``session``, ``new_session`` and ``timeout`` (default
    300 s): ``allowed_tools`` (comma-separated, e.g. ``Read,Write,Edit``: the only tools
    it may use; default: the SDK's own set), ``permission_mode`` (default ``acceptEdits``: file
    edits in the workspace go through unattended, while shell commands and anything else
    that needs an approval are refused, as nobody is there to approve them),
    ``max_turns``, ``cloud`` (``true``: Anthropic's cloud with ``$ANTHROPIC_API_KEY``
    and the SDK's default model instead of the engine) and ``confine`` (as the other
    runtimes); ``base_url`` / ``api_key`` name another Anthropic-compatible endpoint.
    """

    agent_id: ClassVar[str] = "claude_code"
    runtime_id: ClassVar[str] = "claude_code"
    default_timeout: ClassVar[float] = 300.0
    takes_max_turns: ClassVar[bool] = True

    def __init__(
        self,
        parts: AgentParts,
        *,
        run: DelegatedRun,
        endpoint: EngineEndpoint = EngineEndpoint(),
        claude: ClaudeCodeSettings = ClaudeCodeSettings(),
    ) -> None:
        super().__init__(parts, run=replace(run, mode="build"), endpoint=endpoint)
        self.allowed_tools = claude.allowed_tools
        self.permission_mode = claude.permission_mode
        self.cloud = claude.cloud

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        run = cls.delegated_run(options, choose_mode=False)
        tools = options.text("allowed_tools", None) or ""
        return cls(
            parts,
            run=run,
            endpoint=EngineEndpoint(
                base_url=options.text("base_url", None) or "",
                api_key=options.text("api_key", None) or "",
            ),
            claude=ClaudeCodeSettings(
                allowed_tools=tuple(t.strip() for t in tools.split(",") if t.strip()),
                permission_mode=options.choice(
                    "permission_mode",
                    CLAUDE_PERMISSION_MODES,
                    "acceptEdits",
                    what="permission mode",
                ),
                cloud=options.flag("cloud", False),
            ),
        )

    def _request(self, input: str) -> ExternalRunRequest:
        workspace = self.resolved_workspace()
        engine: InferencePort | None = self.inference
        base_url, api_key, model = self.base_url, self.api_key, self.model
        if self.cloud:
            api_key = api_key or self._host().variable("ANTHROPIC_API_KEY")
            if not api_key:
                raise ConfigurationError(
                    "-O cloud=true needs an Anthropic API key.",
                    hint="Set ANTHROPIC_API_KEY, or drop cloud=true to run on your engine.",
                )
            engine, base_url, model = None, "", ""
        elif base_url:
            engine = None
        endpoint = EngineEndpoint(base_url=base_url, api_key=api_key)
        request = self._run_request(input, workspace, endpoint, model)
        return replace(
            request,
            allowed_tools=self.allowed_tools,
            permission_mode=self.permission_mode,
            engine=engine,
        )
