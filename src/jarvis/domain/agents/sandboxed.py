"""``sandboxed``: run another agent inside a container, with the network off.

The wrapped agent (simple, orchestrator, react, native_openhands, rlm...) runs in a
container started by the :class:`~jarvis.domain.sandbox.runner.SandboxRunner`: no network, a
read-only root, no capabilities, an unprivileged user, limits, and only the mounts the
policy allowed (checked before the container starts). Its inference is brokered over the
container's stdio to this agent's engine (:mod:`jarvis.domain.sandbox.host`), so it works
with no engine address inside. Its tools run inside; a host tool (``web_search``,
``llm``...) is there only when passed in ``host_tools`` (the user allowed it), and the host
runs it with its own checks. Secrets travel in the first line of the protocol only.
"""

from __future__ import annotations

import secrets as tokens
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.ports import InferencePort, Mount, ToolPort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.events import EventBus
from jarvis.domain.run.updates import RunFinished, RunUpdate
from jarvis.domain.sandbox.host import HostBounds, HostBroker
from jarvis.domain.sandbox.protocol import (
    MessageModel,
    ResultMessage,
    RunMessage,
    ToolSpecModel,
    memory_hits,
)
from jarvis.domain.sandbox.runner import INSIDE_TOOLS, MountRequest, SandboxRunner


def mount_request(item: MountRequest | str) -> MountRequest:
    """``PATH``, ``PATH:ro``, ``PATH:rw``, ``PATH:TARGET`` or ``PATH:TARGET:ro|rw``."""
    if isinstance(item, MountRequest):
        return item
    parts = item.split(":")
    mode = "ro"
    if len(parts) > 1 and parts[-1] in ("ro", "rw"):
        mode = parts.pop()
    if len(parts) > 2 or not parts[0]:
        raise ConfigurationError(
            f"--mount '{item}' is not PATH[:TARGET][:ro|rw].", hint="Example: --mount ./data:ro"
        )
    return MountRequest(
        source=parts[0], target=parts[1] if len(parts) == 2 else "", read_only=mode == "ro"
    )


def inner_prompts(agent: BaseAgent) -> tuple[str | None, str, JSONObject]:
    """The wrapped agent's system prompt override, persona sections and engine options:
    what the inside must rebuild, since only the agent's key and options cross the wire."""
    prompts, sampling = agent.prompts, agent.sampling
    return prompts.system_prompt, prompts.persona_prompt, dict(sampling.engine_options)


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerAgentSpec:
    """What the inside rebuilds the wrapped agent from: its registry ``key`` (``""``: the
    agent's own id), the names of its tools (those in ``INSIDE_TOOLS``), its own
    ``options`` and the application's default turn limit."""

    key: str = ""
    tools: tuple[str, ...] = ()
    options: JSONObject = field(default_factory=dict)
    default_max_turns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxMounts:
    """What the container sees of the host: ``workspace`` (mounted at ``/workspace``;
    ``""``: none) and the ``--mount`` requests, checked by the runner's policy."""

    workspace: str = ""
    requests: tuple[MountRequest | str, ...] = ()


class SandboxedAgent(BaseAgent):
    """Wraps ``agent`` and runs it in a sandbox container (see the module docstring).

    ``engine`` and ``model`` default to the wrapped agent's. ``inner`` says what the inside
    rebuilds the wrapped agent from; ``host_tools`` are host tools the user allowed,
    brokered by name.
    """

    agent_id: ClassVar[str] = "sandboxed"
    accepts_tools: ClassVar[bool] = False
    wraps_agent: ClassVar[bool] = True
    """Built around another agent (the ask use case builds it, not the registry)."""

    def __init__(
        self,
        agent: BaseAgent,
        runner: SandboxRunner,
        engine: InferencePort | None = None,
        model: str = "",
        bus: EventBus | None = None,
        *,
        inner: InnerAgentSpec = InnerAgentSpec(),
        mounts: SandboxMounts = SandboxMounts(),
        secrets: Mapping[str, str] | None = None,
        host_tools: Sequence[ToolPort] = (),
        bounds: HostBounds | None = None,
    ) -> None:
        super().__init__(engine or agent.inference, model or agent.model, bus=bus)
        self.inner = agent
        self.inner_key = inner.key or agent.agent_id
        """The registry key the inside builds the inner agent from."""
        self.runner = runner
        requests = [mount_request(m) for m in mounts.requests]
        if mounts.workspace:
            requests.insert(0, MountRequest(source=mounts.workspace, target="/workspace"))
        self.mounts: tuple[Mount, ...] = runner.check_mounts(requests)  # refused before start
        self.secrets = dict(secrets or {})
        tools = inner.tools
        inside = [name for name in tools if name in INSIDE_TOOLS]
        unknown = [name for name in tools if name not in INSIDE_TOOLS]
        if unknown:
            raise ConfigurationError(
                "These tools need the host and are not available inside the sandbox: "
                + ", ".join(unknown),
                hint="Allow them explicitly with -O host_tools="
                + ",".join(unknown)
                + " (they then run on the host, brokered).",
            )
        self.tools = tuple(inside)
        self.host_tools = ToolExecutor(host_tools, bus=bus, agent=self.agent_id)
        self.agent_options = dict(inner.options)
        self.system_prompt_text, self.persona_text, engine_options = inner_prompts(agent)
        if engine_options and "options" not in self.agent_options:
            self.agent_options["options"] = engine_options
        self.default_max_turns = inner.default_max_turns
        self.bounds = bounds or HostBounds()

    def _announce(self, what: str | AgentResult) -> None:
        """``AGENT_*`` start / end events, through the base agent's helpers."""
        if isinstance(what, str):
            self.run_started(what)
        else:
            self.run_ended(what)

    def payload(self, input: str, context: AgentContext | None) -> RunMessage:
        """The ``run`` line: the inner agent, its persona, conversation and tools."""
        inner, context = self.inner, context or AgentContext()
        return RunMessage(
            question=input,
            agent=self.inner_key,
            model=self.model,
            engine_id=self.inference.engine_id,
            temperature=inner.temperature,
            max_tokens=inner.max_tokens,
            system_prompt=self.system_prompt_text,
            persona_prompt=self.persona_text,
            agent_options=self.agent_options,
            default_max_turns=self.default_max_turns,
            tools=list(self.tools),
            host_tools=[ToolSpecModel.of(s) for s in self.host_tools.specs],
            file_roots=[m.target for m in self.mounts],
            conversation=[MessageModel.of(m) for m in context.conversation],
            memory_results=memory_hits(context.memory_results),
            metadata=context.metadata,
            secrets=self.secrets,
        )

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        result: AgentResult | None = None
        async for update in self.astream(input, context):
            if isinstance(update, RunFinished):
                result = update.result
        assert result is not None
        return result

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        run = self.payload(input, context)  # bounded and checked before a container starts
        self._announce(input)
        run_id = f"{self.inner_key}-{tokens.token_hex(3)}"
        launch = await self.runner.launch(self.mounts, run_id=run_id)
        broker = HostBroker(
            launch.process,
            generate=self.generate,
            stream=self.stream_inference,
            engine_id=self.inference.engine_id,
            host_tools=self.host_tools if self.host_tools.names else None,
            secrets=self.secrets,
            bounds=self.bounds,
        )
        sandbox: JSONObject = {
            "runtime": launch.runtime,
            "image": launch.image,
            "container": launch.process.id[:12],
            "mounts": [
                {"source": m.source, "target": m.target, "read_only": m.read_only}
                for m in launch.mounts
            ],
            "network": "none",
        }
        async for item in broker.run(run):
            if isinstance(item, ResultMessage):
                result = broker.result(
                    item, model=self.model, metadata={"sandbox": sandbox, "agent": run.agent}
                )
                self._announce(result)
                yield RunFinished(result=result)
            else:
                yield item
