"""Building an agent in a test the way ``jarvis ask -O key=value`` builds it.

``build_agent(NativeOpenHandsAgent, engine, repl=InMemoryRepl(), options={"max_turns": 5})``
reads the options exactly as the command line and the SDK do (same names, same checks,
the agent's own defaults for the rest), so a test states only what it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from jarvis.application.agent_options import OptionReader
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.loop.settings import PromptSettings
from jarvis.domain.ports import InferencePort, ReplPort, ToolPort
from jarvis.domain.run.events import EventBus

AgentT = TypeVar("AgentT", bound=BaseAgent)


def build_agent(
    agent_cls: type[AgentT],
    inference: InferencePort,
    model: str = "m",
    *,
    tools: Sequence[ToolPort] = (),
    repl: ReplPort | None = None,
    bus: EventBus | None = None,
    system_prompt: str | None = None,
    persona_prompt: str = "",
    options: Mapping[str, JSONValue] | None = None,
) -> AgentT:
    """``agent_cls`` on ``inference`` with these parts and named ``options`` (checked)."""
    reader = OptionReader(agent_cls.agent_id, options or {})
    parts = AgentParts(
        inference=inference,
        model=model,
        bus=bus,
        prompts=PromptSettings(system_prompt=system_prompt, persona_prompt=persona_prompt),
        tools=tuple(tools),
        repl=repl,
    )
    agent = agent_cls.from_options(parts, reader)
    reader.finish()
    return agent
