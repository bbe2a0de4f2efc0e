"""What a question's agent is told after its persona: the prompt context of the ask use case.

The project's ``AGENTS.md`` files, the knowledge base's best chunks for the question
(``--memory``) and, for tool-using agents, the skill catalogue with its ``skill`` tool.
Kept apart from :mod:`.ask`, which resolves the agent, model and tools and runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.ports import ToolPort
from jarvis.domain.run.contract import AgentContext

if TYPE_CHECKING:
    from jarvis.application.project_instructions import ProjectInstructionsSource
    from jarvis.application.skills import SkillLibrary
    from jarvis.application.tools.retrieval import MemorySearch


class Question(Protocol):
    """What these functions read of a question (an ``AskQuestion``, named here without
    importing :mod:`.ask`, which imports this module)."""

    @property
    def question(self) -> str: ...

    @property
    def context(self) -> AgentContext | None: ...

    @property
    def project_instructions(self) -> bool | None: ...

    @property
    def memory(self) -> bool | None: ...

    @property
    def skills(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptContext:
    """What enters every agent's system prompt after the persona: the project's
    ``AGENTS.md`` files and, for tool-using agents, the skill catalogue (with the ``skill``
    tool). An empty source adds nothing."""

    instructions: ProjectInstructionsSource | None = None
    use_instructions: bool = True
    """``[agent] project_instructions``: a question may override it."""
    agents_md_max_chars: int = 8000
    skills: SkillLibrary | None = None
    skill_desc_max_chars: int = 250
    memory: Callable[[], MemorySearch] | None = None
    """The knowledge base ``--memory`` searches (built on first use)."""
    use_memory: bool = False
    """``[agent] context_from_memory``: a question may override it."""
    memory_top_k: int = 5
    memory_max_chars: int = 6000


def uses_instructions(
    context: PromptContext, command: Question, agent_cls: type[BaseAgent]
) -> bool:
    """Whether ``command``'s prompt gets the ``AGENTS.md`` files (external runtimes read
    them from their workspace themselves)."""
    wanted = command.project_instructions
    if wanted is None:
        wanted = context.use_instructions
    return wanted and context.instructions is not None and not getattr(agent_cls, "runtime_id", "")


def context_prompt(
    context: PromptContext, command: Question, agent_cls: type[BaseAgent]
) -> tuple[str, ToolPort | None]:
    """The sections after the persona, and the ``skill`` tool when there are skills."""
    parts: list[str] = []
    if uses_instructions(context, command, agent_cls):
        from jarvis.application.project_instructions import instructions_section

        assert context.instructions is not None
        files = context.instructions()
        parts.append(instructions_section(files, context.agents_md_max_chars))
    hits = command.context.memory_results if command.context is not None else ()
    if hits and not agent_cls.reads_memory_itself:
        from jarvis.application.memory_context import memory_section

        parts.append(memory_section(hits, context.memory_max_chars))
    skill_tool: ToolPort | None = None
    library = context.skills
    if agent_cls.accepts_tools and command.skills and library is not None:
        found = library.skills()
        if found:
            from jarvis.application.skills import skill_catalogue
            from jarvis.application.tools.skill import SkillTool

            parts.append(skill_catalogue(found, context.skill_desc_max_chars))
            skill_tool = SkillTool(library)
    return "\n\n".join(p for p in parts if p), skill_tool


async def context_with_memory(context: PromptContext, command: Question) -> AgentContext | None:
    """``command``'s context with its question's best chunks of the knowledge base, when it
    (or ``[agent] context_from_memory``) asks for them and its context has none; ``None``
    when it is to stay as it is."""
    wanted = context.use_memory if command.memory is None else command.memory
    given = command.context or AgentContext()
    if not wanted or context.memory is None or given.memory_results:
        return None
    hits = await context.memory().search(command.question, top_k=context.memory_top_k)
    return replace(given, memory_results=tuple(hits))
