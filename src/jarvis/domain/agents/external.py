"""``opencode`` and ``openhands``: hand the question to an external coding agent.

The runtime (see :mod:`jarvis.domain.external_runtime`) runs its own loop and its own tools
in the workspace, on the user's engine: the agent derives the engine's OpenAI-compatible
base URL (Ollama's ``/v1``, a vLLM or OpenAI-compatible server as configured) and passes
it with the model. The embedded engine has no HTTP API of its own, so these agents refuse
it with a message saying what to do instead.

Options: ``workspace`` (default: the current directory), ``agent`` (opencode: ``build`` or
``plan``), ``session`` (continue that session; default: the runtime's last session in the
workspace), ``new_session`` (start afresh), ``timeout`` (seconds), ``base_url`` (the
engine's OpenAI-compatible URL, when it cannot be derived), ``api_key`` (for that URL).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import ClassVar, Self

from jarvis.domain.agent_contract import AgentContext, AgentResult
from jarvis.domain.agents.base import BaseAgent
from jarvis.domain.agents.options import AgentOptions, AgentParts
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import (
    ExternalRunDone,
    ExternalRunRequest,
    ExternalRuntimesPort,
    ExternalTextDelta,
    ExternalToolDone,
    RuntimeMode,
)
from jarvis.domain.ports import InferencePort
from jarvis.domain.updates import RunFinished, RunUpdate, TextDelta, ToolResultReady

MODES: tuple[RuntimeMode, ...] = ("build", "plan")


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

    def __init__(
        self,
        parts: AgentParts,
        *,
        runtimes: ExternalRuntimesPort | None,
        workspace: str,
        mode: RuntimeMode,
        session_id: str = "",
        new_session: bool = False,
        timeout: float,
        base_url: str,
        api_key: str = "",
    ) -> None:
        super().__init__(
            parts.inference,
            parts.model,
            sampling=parts.sampling,
            prompts=parts.prompts,
            bus=parts.bus,
        )
        self.runtimes = runtimes
        self.workspace = workspace
        self.mode = mode
        self.session_id = session_id
        self.new_session = new_session
        self.timeout = timeout
        self.base_url = base_url
        self.api_key = api_key

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        timeout = options.number("timeout", cls.default_timeout)
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return cls(
            parts,
            runtimes=parts.runtimes,
            workspace=options.text("workspace", None) or os.getcwd(),
            mode=options.choice("agent", cls.modes, cls.modes[0], what="mode"),
            session_id=options.text("session", None) or "",
            new_session=options.flag("new_session", False),
            timeout=timeout,
            base_url=options.text("base_url", None) or openai_base_url(parts.inference),
            api_key=options.text("api_key", None) or "",
        )

    def _request(self, input: str) -> ExternalRunRequest:
        if not self.base_url:
            raise ConfigurationError(
                f"The {self.runtime_id} agent needs an engine with an OpenAI-compatible API; "
                f"the {self.inference.engine_id} engine has none.",
                hint="Use --engine ollama, vllm or openai (for example a llama.cpp server), "
                f"or pass -O base_url=http://HOST:PORT/v1. The embedded engine is not "
                f"supported by {self.runtime_id} yet.",
            )
        if not os.path.isdir(self.workspace):
            raise ConfigurationError(f"The workspace '{self.workspace}' is not a directory.")
        return ExternalRunRequest(
            prompt=input,
            workspace=os.path.realpath(self.workspace),
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            mode=self.mode,
            session_id=self.session_id,
            new_session=self.new_session,
            system_prompt=self.effective_system_prompt()
            if self.prompts.system_prompt or self.prompts.persona_prompt
            else "",
            timeout=self.timeout,
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
    """The opencode agent (``opencode serve``), ``build`` or ``plan``."""

    agent_id: ClassVar[str] = "opencode"
    runtime_id: ClassVar[str] = "opencode"
    modes: ClassVar[tuple[RuntimeMode, ...]] = MODES


class OpenHandsAgent(ExternalRuntimeAgent):
    """The openhands SDK's agent, run in a Python of its own."""

    agent_id: ClassVar[str] = "openhands"
    runtime_id: ClassVar[str] = "openhands"
    default_timeout: ClassVar[float] = 900.0
