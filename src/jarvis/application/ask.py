"""The everyday use case: ask a question through an agent on an engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from jarvis.application.prompt_context import PromptContext as PromptContext
from jarvis.application.prompt_context import (
    context_prompt,
    context_with_memory,
    uses_instructions,
)
from jarvis.application.registry import AgentRegistry
from jarvis.domain.errors import ConfigurationError, EngineUnavailableError, SandboxError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Usage
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.loop.settings import PromptSettings
from jarvis.domain.ports import InferencePort, ReplPort, ToolPort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.events import EventBus
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    RunFinished,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.run.well_formed import well_formed_result, well_formed_update
from jarvis.domain.tools.specs import ToolResult

if TYPE_CHECKING:  # only named in annotations: a question that runs no operator, typed
    # answer or external runtime does not import them (start-up of `jarvis ask`)
    from jarvis.application.approvals import ApprovalChoice
    from jarvis.domain.approvals import ApprovalPolicy
    from jarvis.domain.external_runtime import ExternalRuntimesPort
    from jarvis.domain.loop.approval_gate import ApprovalGate
    from jarvis.domain.operators import OperatorBinding
    from jarvis.domain.typed_output import OutputSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class AskQuestion:
    """A question and how to answer it. ``None`` fields fall back to configuration."""

    question: str
    agent: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    system_prompt: str | None = None
    tools: tuple[str, ...] = ()
    persona: str | None = None
    context: AgentContext | None = None
    agent_options: JSONObject = field(default_factory=dict)
    mounts: tuple[str, ...] = ()
    """Host folders for the ``sandboxed`` agent: ``PATH[:TARGET][:ro|rw]``."""
    operator: OperatorBinding | None = None
    """The operator a tick of ``operative`` / ``monitor_operative`` runs for."""
    project_instructions: bool | None = None
    """Whether ``AGENTS.md`` enters the prompt; ``None``: ``[agent] project_instructions``."""
    memory: bool | None = None
    """Whether the question's best chunks of the knowledge base enter the run
    (``AgentContext.memory_results``); ``None``: ``[agent] context_from_memory``."""
    skills: bool = True
    """Whether a tool-using agent is offered the skills (False for the ``sandboxed``
    agent's inner run: the ``skill`` tool reads host folders the sandbox cannot reach)."""
    output: OutputSpec[object] | None = None
    """A typed answer: the schema the answer must match (see
    :mod:`jarvis.domain.loop.typed_answer`); ``None``: free text."""
    approval: ApprovalChoice | None = None
    """Who approves the run's tool calls (``None``: every call runs unasked, as for an
    operator's unattended tick)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """The answer with everything ``--json`` prints; ``metadata`` is the agent's own
    (e.g. an external runtime's ``session_id``, which a later ``-O session=`` continues)."""

    content: str
    turns: int
    tool_results: tuple[ToolResult, ...]
    usage: Usage
    model: str
    engine: str
    stop_reason: str
    metadata: JSONObject = field(default_factory=dict)
    output: object = None
    """A typed question's validated answer (an instance of its ``output_type``, or the JSON
    value for a schema dict; ``content`` is then that answer as JSON); else ``None``."""

    def __getitem__(self, key: str) -> JSONValue:
        """Read as a mapping too (``answer["content"]``), as OpenJarvis's ``ask_full``
        results are: the keys of :meth:`to_json`."""
        return self.to_json()[key]

    def keys(self) -> list[str]:
        """The keys ``answer[key]`` reads."""
        return list(self.to_json())

    @classmethod
    def from_result(
        cls, result: AgentResult, *, model: str, engine: str, output: object = None
    ) -> Answer:
        return cls(
            output=output,
            content=result.content,
            turns=result.turns,
            tool_results=result.tool_results,
            usage=result.usage,
            model=result.model or model,
            engine=engine,
            stop_reason=result.stop_reason,
            metadata=result.metadata,
        )

    def to_json(self) -> JSONObject:
        return {
            "content": self.content,
            "turns": self.turns,
            "tool_results": [
                {
                    "tool_name": r.tool_name,
                    "content": r.content,
                    "success": r.success,
                    "call_id": r.call_id,
                    "latency_seconds": r.latency_seconds,
                }
                for r in self.tool_results
            ],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.total_tokens,
            },
            "model": self.model,
            "engine": self.engine,
            "stop_reason": self.stop_reason,
            "metadata": self.metadata,
            **({"output": self._output_json()} if self.output is not None else {}),
        }

    def _output_json(self) -> JSONValue:
        """A typed answer's JSON (``content`` holds it, compact)."""
        import json

        value: JSONValue = json.loads(self.content)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSampling:
    """The sampling an engine's runs get when the question and the configuration set none."""

    temperature: float
    why: str


ENGINE_SAMPLING: Mapping[str, EngineSampling] = {
    # On ten plain factual questions the bundled SmolLM2-135M-Instruct answered 8 right at
    # temperature 0, and 4 to 8 at the agents' usual 0.7, varying from run to run. A model
    # that small wanders off (into French, into neighbouring facts) as soon as sampling
    # lets it; its most likely token is its best one, and greedy answers are reproducible.
    "llamacpp": EngineSampling(
        temperature=0.0,
        why="the embedded engine's small model answers most accurately without sampling",
    ),
}
"""Per engine id: the temperature that suits it, used only when nothing else was asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sampling:
    """The temperature a run uses, and where it came from (``--verbose`` says it)."""

    temperature: float
    source: Literal["requested", "engine", "agent"]
    """``requested``: the question (or the configuration) set it; ``engine``: the engine's
    default from :data:`ENGINE_SAMPLING`; ``agent``: the agent's own default."""
    why: str


class ToolProvider(Protocol):
    """Builds the tools named in a request (the tool catalogue)."""

    def build(
        self, names: Sequence[str], *, inference: InferencePort, model: str
    ) -> list[ToolPort]:
        """The tools for ``names``; an unknown name raises ``ConfigurationError``."""
        ...

    async def prepare(self, names: Sequence[str]) -> None:
        """Start what the tools of ``names`` need before :meth:`build` (MCP servers, all
        at once); never fails for a server's fault (its tools then fail when called)."""
        ...


class SandboxBuilder(Protocol):
    """Builds a ``sandboxed`` run around its inner agent
    (:class:`jarvis.application.sandboxed_ask.SandboxedAgents`)."""

    async def build(self, service: AskService, command: AskQuestion) -> tuple[BaseAgent, str]: ...


PersonaPrompt = Callable[[str | None], str]
"""Returns the persona sections for a persona selection (None = default, "none" = nothing)."""


class AskService:
    """Resolves model, agent, tools and persona, then runs the agent."""

    def __init__(
        self,
        *,
        registry: AgentRegistry,
        inference: InferencePort,
        default_agent: str = "simple",
        default_model: str | None = None,
        tools: ToolProvider | None = None,
        default_tools: Sequence[str] = (),
        persona: PersonaPrompt | None = None,
        bus: EventBus | None = None,
        repl: ReplPort | None = None,
        default_max_turns: int | None = None,
        default_temperature: float | None = None,
        default_max_tokens: int | None = None,
        default_system_prompt: str | None = None,
        engine_sampling: Mapping[str, EngineSampling] = ENGINE_SAMPLING,
        sandbox: SandboxBuilder | None = None,
        runtimes: ExternalRuntimesPort | None = None,
        context: PromptContext | None = None,
        approval_policy: ApprovalPolicy | None = None,
    ) -> None:
        self.registry = registry
        self.approval_policy = approval_policy
        """``[tools.approval]``: what a question's :class:`ApprovalChoice` applies."""
        self.context = context or PromptContext()
        """The project instructions and skills every agent's prompt gets after the persona."""
        self.inference = inference
        self.default_agent = default_agent
        self.default_model = default_model
        self.tools = tools
        self.default_tools = tuple(default_tools)
        """``[tools] enabled``: what tool-using agents get when a question names no tools."""
        self.persona = persona
        self.bus = bus
        self.repl = repl
        """The REPL factory handed to agents that run code (``uses_repl``)."""
        self.default_max_turns = default_max_turns
        """``[agent] max_turns``: the turn budget of tool-using agents unless the question's
        agent options set one; ``None`` leaves each agent its own default."""
        self.default_temperature = default_temperature
        """``[agent] temperature``: for a question that sets none (``None``: the engine's or
        the agent's default)."""
        self.default_max_tokens = default_max_tokens
        """``[agent] max_tokens``: for a question that sets none (``None``: the agent's)."""
        self.default_system_prompt = default_system_prompt or None
        """``[agent] system_prompt``: for a question that sets none (``None``: the agent's)."""
        self.engine_sampling = engine_sampling
        """Per engine id, the sampling used when a question sets no temperature."""
        self._resolved_model: str | None = default_model or None
        self.sandbox = sandbox
        """Builds ``sandboxed`` runs (``None``: no container sandbox configured)."""
        self.runtimes = runtimes
        """The external runtimes the ``opencode`` / ``openhands`` agents delegate to."""

    async def resolve_model(self, requested: str | None) -> str:
        """``requested`` > configured default > the engine's first model."""
        if requested:
            return requested
        if self._resolved_model:
            return self._resolved_model
        models = await self.inference.list_models()
        if not models:
            raise EngineUnavailableError(
                f"The {self.inference.engine_id} engine lists no models.",
                engine=self.inference.engine_id,
                url=self.inference.base_url,
                hint="Pass --model NAME or set [engine] model in config.toml.",
            )
        self._resolved_model = models[0]
        return models[0]

    def sampling(self, command: AskQuestion) -> Sampling:
        """The temperature ``command`` runs with: its own, else ``[agent] temperature``, else
        the engine's default (:data:`ENGINE_SAMPLING`), else the agent's. Raises
        ``UnknownAgentError`` for an unknown agent, as running it would."""
        requested = self.default_temperature if command.temperature is None else command.temperature
        if requested is not None:
            return Sampling(temperature=requested, source="requested", why="as requested")
        engine = self.engine_sampling.get(self.inference.engine_id)
        if engine is not None:
            return Sampling(temperature=engine.temperature, source="engine", why=engine.why)
        key = self.registry.resolve(command.agent or self.default_agent)
        agent_cls = self.registry.get(key)
        return Sampling(
            temperature=agent_cls.default_sampling.temperature,
            source="agent",
            why=f"the default of the {key} agent",
        )

    async def _tools_for(
        self, command: AskQuestion, agent_cls: type[BaseAgent], model: str
    ) -> list[ToolPort]:
        """The tools ``command`` names (else the configured ones), for an agent that takes
        tools; prepared (e.g. MCP servers started) before they are built."""
        if not agent_cls.accepts_tools:
            return []
        names = command.tools or self.default_tools
        if names and self.tools is None:
            raise ConfigurationError("No tool catalogue is configured.")
        if self.tools is None or not names:
            return []
        await self.tools.prepare(names)
        return self.tools.build(names, inference=self.inference, model=model)

    def _inference_for(self, command: AskQuestion, agent_cls: type[BaseAgent]) -> InferencePort:
        """The engine, wrapped for a typed question so that it asks for the schema the
        strongest way it can (a plain agent's whole reply is constrained)."""
        if command.output is None:
            return self.inference
        from jarvis.application.typed_questions import typed_inference  # typed only

        return typed_inference(self.inference, command.output, agent_cls)

    async def build_agent(self, command: AskQuestion) -> tuple[BaseAgent, str]:
        """The agent instance for ``command`` and the model it will use."""
        if not command.question.strip():
            raise ConfigurationError("The question is empty.", hint='Usage: jarvis ask "question"')
        key = self.registry.resolve(command.agent or self.default_agent)
        agent_cls = self.registry.get(key)
        if getattr(agent_cls, "wraps_agent", False):  # sandboxed: built around its inner agent
            if self.sandbox is None:
                raise SandboxError("No container sandbox is configured for this application.")
            return await self.sandbox.build(self, command)
        if command.mounts:
            raise ConfigurationError(
                "--mount applies to the sandboxed agent only.", hint="Use -a sandboxed."
            )
        if command.tools and not agent_cls.accepts_tools:
            raise ConfigurationError(
                f"Agent '{key}' does not take tools, but tools were given: "
                + ", ".join(command.tools),
                hint="Use a tool-using agent such as --agent orchestrator, or drop --tools.",
            )
        model = await self.resolve_model(command.model)
        tools = await self._tools_for(command, agent_cls, model)
        inference = self._inference_for(command, agent_cls)
        extra, skill_tool = context_prompt(self.context, command, agent_cls)
        if skill_tool is not None and all(t.spec.name != skill_tool.spec.name for t in tools):
            tools.append(skill_tool)
        persona = self.persona(command.persona) if self.persona is not None else ""
        default = agent_cls.default_sampling
        max_tokens = self.default_max_tokens if command.max_tokens is None else command.max_tokens
        parts = AgentParts(
            inference=inference,
            model=model,
            bus=self.bus,
            sampling=replace(
                default,
                temperature=self.sampling(command).temperature,
                max_tokens=default.max_tokens if max_tokens is None else max_tokens,
            ),
            prompts=PromptSettings(
                system_prompt=(
                    self.default_system_prompt
                    if command.system_prompt is None
                    else command.system_prompt
                ),
                persona_prompt="\n\n".join(p for p in (persona.strip(), extra) if p),
            ),
            tools=tuple(tools),
            repl=self.repl if agent_cls.uses_repl else None,
            operator=command.operator,
            runtimes=self.runtimes,
            approvals=self._approvals(command, tools),
        )
        defaults: JSONObject = {}
        if self.default_max_turns is not None:
            defaults["max_turns"] = self.default_max_turns  # for the agents that take it
        agent = self.registry.create(key, parts, command.agent_options, defaults=defaults)
        return agent, model

    def _approvals(self, command: AskQuestion, tools: Sequence[ToolPort]) -> ApprovalGate | None:
        """The gate of ``command``'s tool calls: its choice over ``[tools.approval]``, with
        the sandbox that verifiably confines ``code_interpreter`` (probed only when the run
        has that tool)."""
        choice = command.approval
        if choice is None or not tools:
            return None
        from jarvis.application.approvals import approval_gate  # a run with tools only

        return approval_gate(choice, self.approval_policy, tools, self.repl)

    def instruction_files(self, command: AskQuestion) -> tuple[str, ...]:
        """The ``AGENTS.md`` files ``command``'s prompt gets (``--verbose`` names them)."""
        key = self.registry.resolve(command.agent or self.default_agent)
        if not uses_instructions(self.context, command, self.registry.get(key)):
            return ()
        assert self.context.instructions is not None
        return tuple(file.path for file in self.context.instructions() if file.text.strip())

    async def with_memory(self, command: AskQuestion) -> AskQuestion:
        """``command`` with its question's best chunks of the knowledge base in its context,
        when it (or ``[agent] context_from_memory``) asks for them and its context has none."""
        found = await context_with_memory(self.context, command)
        return command if found is None else replace(command, context=found)

    @staticmethod
    def _report_memory(command: AskQuestion, answer: Answer) -> Answer:
        if command.context is not None and command.context.memory_results:
            from jarvis.application.memory_context import used_chunks

            chunks: list[JSONValue] = list(used_chunks(command.context.memory_results))
            return replace(answer, metadata={**answer.metadata, "memory_results": chunks})
        return answer

    async def ask(self, command: AskQuestion) -> Answer:
        command = await self.with_memory(command)
        agent, model = await self.build_agent(command)
        if command.output is not None:
            typed = await self._typed(agent, model, command, command.output)
            return self._report_memory(command, typed)
        result = well_formed_result(await agent.arun(command.question, command.context))
        answer = Answer.from_result(result, model=model, engine=self.inference.engine_id)
        return self._report_memory(command, answer)

    async def _typed(
        self, agent: BaseAgent, model: str, command: AskQuestion, spec: OutputSpec[object]
    ) -> Answer:
        """A typed question: the answer checked against ``spec``, retried with its errors."""
        from jarvis.application.typed_questions import answer_typed  # typed only

        engine = self.inference.engine_id
        typed = await answer_typed(agent, command.question, command.context, spec, engine=engine)
        result = well_formed_result(typed.result)
        return Answer.from_result(result, model=model, engine=engine, output=typed.output)

    async def stream(
        self, command: AskQuestion
    ) -> AsyncIterator[
        TextDelta
        | ToolCallsRequested
        | ToolResultReady
        | ApprovalRequired
        | ApprovalDecided
        | Answer
    ]:
        """The run's updates as they happen, then the :class:`Answer` as the last item
        (an :data:`~jarvis.application.run_updates.AnswerUpdate` each).

        A typed question is answered whole (only a checked answer is shown): its JSON
        arrives as one piece of text."""
        command = await self.with_memory(command)
        agent, model = await self.build_agent(command)
        if command.output is not None:
            answer = await self._typed(agent, model, command, command.output)
            answer = self._report_memory(command, answer)
            yield TextDelta(text=answer.content)
            yield answer
            return
        streamed = False
        async for given in agent.astream(command.question, command.context):
            update = well_formed_update(given)  # a plug-in's, a tool's, an engine's text
            if isinstance(update, RunFinished):
                if not streamed and update.result.content:
                    # an agent that does not stream (a plug-in's synchronous run()): its
                    # answer is still shown as it would have been streamed
                    yield TextDelta(text=update.result.content)
                yield self._report_memory(
                    command,
                    Answer.from_result(update.result, model=model, engine=self.inference.engine_id),
                )
            else:
                streamed = streamed or isinstance(update, TextDelta)
                yield update
