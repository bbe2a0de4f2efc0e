"""How to answer one question: :class:`AskOptions`, the keyword arguments of every
``Jarvis`` question method, and the command they make."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack

from jarvis.application.ask import AskQuestion
from jarvis.domain.approvals import APPROVAL_MODES
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.run.contract import AgentContext

if TYPE_CHECKING:
    from jarvis.application.approvals import ApprovalChoice, ApproveCallback


class AskOptions(TypedDict, total=False):
    """How to answer one question: the keyword arguments of every ``Jarvis`` question method
    (``ask``, ``ask_full``, ``ask_stream``, ``aask``, ``aask_full``, ``aask_stream``).

    Every key is optional; a missing key or ``None`` falls back to the instance and the
    configuration, as on the command line.
    """

    agent: str | None
    """The agent to run (``simple``, ``orchestrator``, ``react``, ``rlm``...); default: the
    instance's ``agent``, else ``[agent] default``, else ``simple``."""
    model: str | None
    """The model; default: the instance's ``model`` (else ``[engine] model``), else the
    engine's first model."""
    temperature: float | None
    """Sampling temperature; default: ``[agent] temperature``."""
    max_tokens: int | None
    """The most tokens to generate per turn; default: ``[agent] max_tokens``."""
    system: str | None
    """Replaces the agent's system prompt."""
    tools: Sequence[str] | None
    """Tools for a tool-using agent, by name (``["calculator", "think"]``); default:
    ``[tools] enabled`` and the instance's own tools."""
    persona: str | None
    """A named persona (``<config dir>/personas/NAME/``), or ``"none"`` for no persona;
    default: ``[memory_files] persona_name``, else the default files."""
    context: str | AgentContext | None
    """Text the agent works on (the ``rlm`` agent keeps it in its REPL as ``context``, never
    in the prompt), or a whole ``AgentContext``."""
    agent_options: Mapping[str, JSONValue]
    """Settings of the chosen agent, as ``-O KEY=VALUE`` on the command line: for the
    ``orchestrator`` ``mode="structured"``, ``tool_choice="required"``, ``max_turns``...
    An option the agent does not take is a ``ConfigurationError``."""
    mounts: Sequence[str] | None
    """Host folders the ``sandboxed`` agent sees, ``PATH[:TARGET][:ro|rw]`` (read-only
    unless the mount allowlist allows writing), as ``--mount`` on the command line."""
    project_instructions: bool | None
    """Whether the ``AGENTS.md`` files of the working directory and its parents enter the
    prompt; default: ``[agent] project_instructions`` (true)."""
    memory: bool | None
    """Whether the question's best chunks of the knowledge base (``jarvis memory add``)
    enter the run as quoted context; default: ``[agent] context_from_memory`` (false)."""
    approve: str | ApproveCallback | ApprovalChoice | None
    """Who approves tool calls the policy asks about (``[tools.approval]``): a callable
    (sync or async) that receives the ``ApprovalRequest`` and returns a bool or an
    ``ApprovalAnswer`` with a reason; or ``"auto"`` / ``"ask"`` / ``"deny"`` for every
    tool. Default (and ``"ask"``): nobody to ask, so such calls are denied, with a message
    the model reads."""


_OPTION_NAMES = AskOptions.__optional_keys__


def ask_question(question: str, **options: Unpack[AskOptions]) -> AskQuestion:
    """The command for one question and its options (``None`` is left for the ask use case
    to fill from the ``[agent]`` settings). An option that is not one of them is a
    ``TypeError``."""
    unknown = options.keys() - _OPTION_NAMES
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {min(unknown)!r}; the options are "
            + ", ".join(sorted(_OPTION_NAMES))
        )
    temperature = options.get("temperature")
    if temperature is not None and not math.isfinite(temperature):
        raise ConfigurationError(
            f"temperature={temperature!r} is not a finite number.", hint="Pass e.g. 0.7."
        )
    context = options.get("context")
    if isinstance(context, str):
        context = AgentContext(metadata={"context": context})
    return AskQuestion(
        question=question,
        agent=options.get("agent"),
        model=options.get("model"),
        temperature=temperature,
        max_tokens=options.get("max_tokens"),
        system_prompt=options.get("system"),
        tools=tuple(options.get("tools") or ()),
        persona=options.get("persona"),
        context=context,
        agent_options=dict(options.get("agent_options") or {}),
        mounts=tuple(options.get("mounts") or ()),
        project_instructions=options.get("project_instructions"),
        memory=options.get("memory"),
        approval=approval_choice(options.get("approve")),
    )


def approval_choice(approve: str | ApproveCallback | ApprovalChoice | None) -> ApprovalChoice:
    """The approvals of a question from its ``approve`` option (see :class:`AskOptions`)."""
    from jarvis.application.approvals import (
        ApprovalChoice,
        CallbackApprovals,
        DenyingApprovals,
    )

    if isinstance(approve, ApprovalChoice):
        return approve
    nobody = DenyingApprovals("no approve= callback to ask")
    if approve is None:
        return ApprovalChoice(port=nobody)
    if isinstance(approve, str):
        for mode in APPROVAL_MODES:
            if approve == mode:
                return ApprovalChoice(port=nobody, mode=mode, mode_source="approve=")
        raise ConfigurationError(
            f"Unknown approve={approve!r}.",
            hint="Pass 'auto', 'ask', 'deny' or a callable that receives the call.",
        )
    if not callable(approve):
        raise TypeError("approve= takes 'auto', 'ask', 'deny' or a callable")
    return ApprovalChoice(port=CallbackApprovals(approve))
