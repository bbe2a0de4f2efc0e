"""Typed questions: the engine asked for the answer's schema the strongest way it can, and
the answer checked against it, retried with its errors.

The ask use case loads this module only for a question that asks for a typed answer: a
plain question, and ``from jarvis import Jarvis``, do not import the typed-answer loop.
"""

from __future__ import annotations

from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.typed_answer import StructuredAnswers, TypedResult, run_typed
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.typed_output import OutputSpec


def typed_inference(
    inference: InferencePort, spec: OutputSpec[object], agent_cls: type[BaseAgent]
) -> InferencePort:
    """``inference``, asking for ``spec``'s schema (a plain agent's whole reply is
    constrained; a tool-using agent's final answer)."""
    return StructuredAnswers(
        inference, spec.schema, constrain_plain=issubclass(agent_cls, SimpleAgent)
    )


async def answer_typed(
    agent: BaseAgent,
    question: str,
    context: AgentContext | None,
    spec: OutputSpec[object],
    *,
    engine: str,
) -> TypedResult[object]:
    """``agent``'s answer to ``question`` once it matches ``spec`` (retried with its errors,
    at most ``spec.retries`` times)."""
    return await run_typed(agent, question, context, spec, engine=engine)
