"""The managed-agent API's request and response bodies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool

from jarvis.application.managed_agents import ManagedAgentSpec
from jarvis.domain.json_types import JSONObject
from jarvis.domain.managed_agents import ManagedAgent
from jarvis.domain.sessions.records import SessionMessage

MAX_PROMPT_CHARS = 100_000

MemorySwitch = StrictBool | None
"""``true``/``false``/``null`` only: ``"yes"`` or ``1`` is a 400, not read as a boolean."""


class _Strict(BaseModel):
    """Definitions are the server's own API: a misspelt field is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class _Fields(Protocol):
    """The fields a create and a patch body share under the same names."""

    model: str | None
    system_prompt: str | None
    persona: str | None
    temperature: float | None
    max_tokens: int | None
    max_turns: int | None
    memory: bool | None


def _spec(
    body: _Fields,
    *,
    id: str | None,
    name: str,
    agent: str,
    tools: Sequence[str],
    options: Mapping[str, JsonValue],
) -> ManagedAgentSpec:
    """The spec a body describes; the fields each body defaults its own way are passed."""
    agent_options: JSONObject = dict(options)
    return ManagedAgentSpec(
        id=id,
        name=name,
        agent=agent,
        model=body.model,
        system_prompt=body.system_prompt,
        tools=tuple(tools),
        persona=body.persona,
        temperature=body.temperature,
        max_tokens=body.max_tokens,
        max_turns=body.max_turns,
        agent_options=agent_options,
        memory=body.memory,
    )


class ManagedAgentIn(_Strict):
    """A definition to create. ``None`` falls back to the server's configuration."""

    id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    name: str = Field(default="", max_length=256)
    agent: str = Field(default="simple", min_length=1, max_length=64)
    """The agent of the registry (``simple``, ``orchestrator``, ``react``...)."""
    model: str | None = Field(default=None, min_length=1, max_length=256)
    system_prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    tools: list[str] = Field(default_factory=list, max_length=64)
    persona: str | None = Field(default=None, max_length=128)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1 << 20)
    max_turns: int | None = Field(default=None, ge=1, le=10_000)
    agent_options: dict[str, JsonValue] = Field(default_factory=dict)
    memory: MemorySwitch = None
    """Whether runs receive their question's best chunks of the knowledge base; ``None``:
    the server's ``[agent] context_from_memory``."""

    def spec(self) -> ManagedAgentSpec:
        return _spec(
            self, id=self.id, name=self.name, agent=self.agent, tools=self.tools,
            options=self.agent_options,
        )  # fmt: skip


class ManagedAgentPatch(_Strict):
    """The fields to change; the ones left out keep their value (``null`` resets one)."""

    name: str | None = Field(default=None, max_length=256)
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    model: str | None = Field(default=None, min_length=1, max_length=256)
    system_prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    tools: list[str] | None = Field(default=None, max_length=64)
    persona: str | None = Field(default=None, max_length=128)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1 << 20)
    max_turns: int | None = Field(default=None, ge=1, le=10_000)
    agent_options: dict[str, JsonValue] | None = None
    memory: MemorySwitch = None

    def spec(self) -> tuple[ManagedAgentSpec, list[str]]:
        spec = _spec(
            self, id=None, name=self.name or "", agent=self.agent or "simple",
            tools=self.tools or (), options=self.agent_options or {},
        )  # fmt: skip
        return spec, sorted(self.model_fields_set)


class ManagedAgentOut(BaseModel):
    id: str
    object: str = "managed_agent"
    name: str
    agent: str
    model: str | None
    system_prompt: str | None
    tools: list[str]
    persona: str | None
    temperature: float | None
    max_tokens: int | None
    max_turns: int | None
    agent_options: dict[str, JsonValue]
    memory: bool | None
    created_at: int
    """Seconds since the epoch."""
    updated_at: int

    @classmethod
    def of(cls, agent: ManagedAgent) -> ManagedAgentOut:
        return cls(
            id=agent.id,
            name=agent.name,
            agent=agent.agent,
            model=agent.model,
            system_prompt=agent.system_prompt,
            tools=list(agent.tools),
            persona=agent.persona,
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            max_turns=agent.max_turns,
            agent_options=agent.agent_options,
            memory=agent.memory,
            created_at=agent.created_us // 1_000_000,
            updated_at=agent.updated_us // 1_000_000,
        )


class MessageIn(_Strict):
    content: str = Field(min_length=1)
    stream: bool = False
    mode: Literal["queued", "immediate"] = "queued"
    """Without ``stream``: ``queued`` keeps the message for ``/run``; ``immediate`` runs
    the agent on it at once, after answering 202 (the answer is stored)."""
    memory: MemorySwitch = None
    """This run only (``stream`` or ``immediate``): whether it receives the question's best
    chunks of the knowledge base; ``None``: the definition's ``memory``."""


class RunIn(_Strict):
    stream: bool = False
    memory: MemorySwitch = None
    """This run only: whether it receives the question's best chunks of the knowledge base;
    ``None``: the definition's ``memory``."""


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: str


class MessageOut(BaseModel):
    role: str
    content: str
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    model: str | None = None
    usage: dict[str, int] | None = None
    created_at: float
    """Seconds since the epoch."""

    @classmethod
    def of(cls, record: SessionMessage) -> MessageOut:
        message = record.message
        return cls(
            role=message.role.value,
            content=message.content,
            tool_calls=[
                ToolCallOut(id=c.id, name=c.name, arguments=c.arguments_json())
                for c in message.tool_calls
            ]
            or None,
            tool_call_id=message.tool_call_id,
            name=message.name,
            model=record.model or None,
            usage=None
            if record.usage is None
            else {
                "prompt_tokens": record.usage.prompt_tokens,
                "completion_tokens": record.usage.completion_tokens,
            },
            created_at=record.created_at.timestamp(),
        )
