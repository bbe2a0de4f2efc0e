"""What enters every agent's system prompt: the persona files and the project's context.

The persona (SOUL.md, MEMORY.md, USER.md and ``personas/`` in the config dir), the
``AGENTS.md`` files of the working directory up to the repository root and the Agent Skills
are read per call; what was read is kept, with one watch over all these files
(:mod:`jarvis.adapters.inotify_watch`), until one of them changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jarvis.application.ask import PersonaPrompt, PromptContext
from jarvis.application.config import JarvisConfig
from jarvis.domain.ports import PersonaStorePort
from jarvis.entrypoints.settings import config_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from jarvis.adapters.inotify_watch import InotifyWatch
    from jarvis.application.skills import Skill, SkillLibrary
    from jarvis.application.system_prompt import SystemPromptBuilder
    from jarvis.application.tools.retrieval import MemorySearch


def file_watch() -> InotifyWatch:
    from jarvis.adapters.inotify_watch import InotifyWatch

    return InotifyWatch()


def persona_store(config: JarvisConfig, watch: InotifyWatch | None = None) -> PersonaStorePort:
    from jarvis.adapters.persona_files.store import FilesystemPersonaStore
    from jarvis.application.system_prompt import read_limit_bytes

    files = config.memory_files
    return FilesystemPersonaStore(
        config_dir(),
        soul_path=files.soul_path or None,
        memory_path=files.memory_path or None,
        user_path=files.user_path or None,
        max_read_bytes=read_limit_bytes(config.system_prompt),
        watch=watch,
    )


def prompt_builder(*, store: PersonaStorePort, config: JarvisConfig) -> SystemPromptBuilder:
    from jarvis.application.system_prompt import SystemPromptBuilder

    return SystemPromptBuilder(store, config.system_prompt, config.memory_files)


def persona_prompt(builder: SystemPromptBuilder) -> PersonaPrompt:
    return builder


def _skill_notice(message: str) -> None:
    """A skill that is skipped (its path and name are a folder's text, filtered on a
    terminal)."""
    from jarvis.entrypoints.terminal_text import write_stderr

    write_stderr(message + "\n")


class SkillsOnDemand:
    """The skill folders (a ``SkillLibrary``), imported when an agent that takes tools
    first asks for them: a question to an agent without tools never looks."""

    def __init__(self, locations: Sequence[str], watch: InotifyWatch | None = None) -> None:
        self._locations = tuple(locations)
        self._watch = watch
        self._library: SkillLibrary | None = None

    def _get(self) -> SkillLibrary:
        if self._library is None:
            from jarvis.adapters.filesystem_tools.skill_folders import SkillFolders

            self._library = SkillFolders(self._locations, notice=_skill_notice, watch=self._watch)
        return self._library

    def skills(self) -> Sequence[Skill]:
        return self._get().skills()

    def read(self, name: str, file: str | None = None) -> str:
        return self._get().read(name, file)


def prompt_context(
    config: JarvisConfig,
    memory: Callable[[], MemorySearch] | None = None,
    watch: InotifyWatch | None = None,
) -> PromptContext:
    """``AGENTS.md`` from the working directory up, and the skills of ``./.jarvis/skills``,
    ``[skills] paths`` and ``<config dir>/skills`` (in that precedence)."""
    from jarvis.adapters.filesystem_tools.project_files import AgentsMdFiles

    budgets = config.system_prompt
    locations = [".jarvis/skills", *config.skills.paths, str(config_dir() / "skills")]
    return PromptContext(
        instructions=AgentsMdFiles(
            max_bytes=max(64 * 1024, 4 * budgets.agents_md_max_chars), watch=watch
        ),
        use_instructions=config.agent.project_instructions,
        agents_md_max_chars=budgets.agents_md_max_chars,
        skills=SkillsOnDemand(locations, watch),
        skill_desc_max_chars=budgets.skill_desc_max_chars,
        memory=memory,
        use_memory=config.agent.context_from_memory,
        memory_top_k=config.memory.context_top_k,
        memory_max_chars=config.memory.context_max_chars,
    )
