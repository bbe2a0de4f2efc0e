"""The vocabulary of OpenJarvis's ``config.toml``: every key it may hold, and of those the
ones jarvis does not implement, with why (what :mod:`jarvis.application.openjarvis_config`
translates a file with). Plain data: adding a key OpenJarvis gained is a change here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

ANY: Final = "*"
"""A section of :data:`OPENJARVIS_KEYS` whose content is accepted whatever it holds."""

KeyTree = Mapping[str, "KeyTree | str | None"]
"""Known keys: a leaf is ``None``, a sub-section a nested mapping, ``ANY`` anything."""

_STORAGE: KeyTree = dict.fromkeys(
    (
        "default_backend",
        "db_path",
        "context_top_k",
        "context_min_score",
        "context_max_tokens",
        "chunk_size",
        "chunk_overlap",
        "enabled",
        "backend",
        "extraction_model",
        "max_facts",
        "facts_path",
        "context_injection",
    )
)
_HOST: KeyTree = {"host": None}

FLAT_ENGINE_KEYS: Final[Mapping[str, str]] = {
    **{
        f"{name}_host": f"{name}.host"
        for name in (
            "ollama",
            "vllm",
            "llamacpp",
            "sglang",
            "mlx",
            "lmstudio",
            "exo",
            "nexa",
            "uzu",
            "apple_fm",
            "lemonade",
        )
    },
    "llamacpp_path": "llamacpp.binary_path",
}
"""OpenJarvis's older flat ``[engine]`` keys (still accepted there, its configuration guide's
"Backward compatibility"), with the nested key each stands for: ``ollama_host`` is
``[engine.ollama] host``."""

OPENAI_COMPATIBLE_ENGINES: Final[Mapping[str, str]] = {
    "sglang": "http://localhost:30000/v1",
    "llamacpp": "http://localhost:8080/v1",
    "mlx": "http://localhost:8080/v1",
    "lmstudio": "http://localhost:1234/v1",
    "exo": "http://localhost:52415/v1",
    "nexa": "http://localhost:18181/v1",
    "uzu": "http://localhost:8000",
    "apple_fm": "http://localhost:8079/v1",
    "lemonade": "http://localhost:13305/v1",
}
"""OpenJarvis's engines that are OpenAI-compatible servers, with their default URL: chosen
as ``[engine] default``, jarvis reaches them with its ``openai`` engine at
``[engine.<name>] host`` (``/v1`` appended, except for uzu, which serves without it)."""

OPENJARVIS_KEYS: Final[KeyTree] = {
    "installed_at": None,
    "installer_version": None,
    "intelligence": dict.fromkeys(
        (
            "default_model",
            "model_chat",
            "model_short",
            "model_long",
            "model_code",
            "fallback_model",
            "model_path",
            "checkpoint_path",
            "quantization",
            "preferred_engine",
            "provider",
            "temperature",
            "max_tokens",
            "top_p",
            "top_k",
            "repetition_penalty",
            "stop_sequences",
        )
    ),
    "engine": {
        "default": None,
        "ollama": _HOST,
        "vllm": _HOST,
        "sglang": _HOST,
        "llamacpp": {"host": None, "binary_path": None},
        "mlx": _HOST,
        "lmstudio": _HOST,
        "exo": _HOST,
        "nexa": {"host": None, "device": None},
        "uzu": _HOST,
        "apple_fm": _HOST,
        "lemonade": _HOST,
        "gemma_cpp": ANY,
        "cloud": ANY,
        "litellm": ANY,
        **dict.fromkeys(FLAT_ENGINE_KEYS),
    },
    "agent": dict.fromkeys(
        (
            "default_agent",
            "max_turns",
            "tools",
            "default_tools",
            "objective",
            "system_prompt",
            "system_prompt_path",
            "context_from_memory",
            "default_system_prompt",
            "temperature",
            "max_tokens",
        )
    ),
    "tools": {
        "enabled": None,
        "searxng_url": None,
        "file_allowed_directories": None,
        "storage": _STORAGE,
        "mcp": ANY,
        "browser": ANY,
    },
    "mcp": ANY,
    "server": {
        **dict.fromkeys(("host", "port", "agent", "model", "workers", "cors_origins")),
        "auth": {"api_key": None},
    },
    "telemetry": dict.fromkeys(
        (
            "enabled",
            "db_path",
            "gpu_metrics",
            "gpu_poll_interval_ms",
            "energy_vendor",
            "warmup_samples",
            "steady_state_window",
            "steady_state_threshold",
        )
    ),
    "traces": dict.fromkeys(("enabled", "db_path")),
    "memory_files": dict.fromkeys(
        ("soul_path", "memory_path", "user_path", "nudge_interval", "persona_name")
    ),
    "system_prompt": dict.fromkeys(
        (
            "prefix",
            "soul_max_chars",
            "memory_max_chars",
            "user_max_chars",
            "skill_desc_max_chars",
            "truncation_strategy",
        )
    ),
    "sandbox": dict.fromkeys(
        (
            "enabled",
            "image",
            "timeout",
            "workspace",
            "mount_allowlist_path",
            "max_concurrent",
            "runtime",
            "wasm_fuel_limit",
            "wasm_memory_limit_mb",
        )
    ),
    "sessions": dict.fromkeys(("enabled", "max_age_hours", "consolidation_threshold", "db_path")),
    **dict.fromkeys(
        (
            "learning",
            "deep_research",
            "analytics",
            "channel",
            "security",
            "scheduler",
            "workflow",
            "a2a",
            "operators",
            "speech",
            "voice",
            "optimize",
            "agent_manager",
            "compression",
            "skills",
            "digest",
            "proactive",
            "mining",
            "memory",
            "hardware",
        ),
        ANY,
    ),
}
"""Every key of OpenJarvis's configuration (its ``JarvisConfig`` dataclasses): a key in
neither this nor jarvis's schema is refused as a typo."""

NOT_IMPLEMENTED: Final[Mapping[str, str]] = {
    "learning": "jarvis does no learning or optimisation",
    "deep_research": "jarvis has no deep_research agent",
    "analytics": "jarvis sends no analytics",
    "channel": "jarvis has no messaging channels",
    "security": "jarvis has no guardrails engine (its own checks always apply)",
    "scheduler": "jarvis schedules through `jarvis operators`",
    "workflow": "jarvis has no workflows",
    "a2a": "jarvis has no agent-to-agent server",
    "operators": "jarvis's operators are added with `jarvis operators add`",
    "speech": "jarvis has no speech input",
    "voice": "jarvis has no voice input or output",
    "optimize": "jarvis does no optimisation",
    "agent_manager": "jarvis keeps managed agents in its session store",
    "compression": "jarvis bounds history with [sessions] history_messages/history_tokens",
    "digest": "jarvis has no morning digest",
    "proactive": "jarvis has no proactive agent",
    "mining": "jarvis does no mining",
    "hardware": "jarvis does not read hardware facts from the file",
    "installed_at": "install provenance only",
    "installer_version": "install provenance only",
    "tools.browser": "jarvis has no browser tool",
}
"""Why a section is ignored, by dotted key."""

OPENJARVIS_ONLY_TOOLS: Final = frozenset(
    [
        "agent_kill",
        "agent_list",
        "agent_send",
        "agent_spawn",
        "apply_patch",
        "audio_transcribe",
        "browser_axtree",
        "browser_click",
        "browser_extract",
        "browser_navigate",
        "browser_screenshot",
        "browser_type",
        "calendar_search",
        "calendar_upcoming",
        "cancel_scheduled_task",
        "channel_list",
        "channel_send",
        "channel_status",
        "check_permission",
        "code_interpreter_docker",
        "db_query",
        "digest_collect",
        "docker_shell_exec",
        "execute_pending_actions",
        "file_write",
        "get_pending_actions",
        "git_commit",
        "git_diff",
        "git_log",
        "git_status",
        "http_request",
        "image_generate",
        "kg_add_entity",
        "kg_add_relation",
        "kg_neighbors",
        "kg_query",
        "knowledge_search",
        "knowledge_sql",
        "list_scheduled_tasks",
        "memory_index",
        "pause_scheduled_task",
        "pdf_extract",
        "queue_action",
        "record_decision",
        "repl",
        "resume_scheduled_task",
        "scan_chunks",
        "schedule_task",
        "shell_exec",
        "skill_manage",
        "text_to_speech",
    ]
)
"""OpenJarvis's built-in tools that jarvis does not have: left out of ``[tools] enabled``
and reported, so that an OpenJarvis tool list does not make every tool-using question a
usage error."""

OPENJARVIS_TOOL_NAMES: Final[Mapping[str, str]] = {
    "memory_search": "retrieval",
    "memory_retrieve": "retrieval",
}
"""OpenJarvis's names of a tool jarvis has under its own name. Its ``memory_search`` and
``memory_retrieve`` do what its ``retrieval`` does (the memory backend's ``retrieve(query,
top_k)``, worded differently): in ``[tools] enabled`` and ``--tools`` they mean jarvis's
``retrieval``, the model is offered as ``retrieval``."""

OPERATIVE_OWN_TOOLS: Final = frozenset(["memory_store"])
"""Tools jarvis has only as the operative agents' own (``memory_store``, bound to each
operator's tick), not as tools to enable: left out of ``[tools] enabled`` and reported."""

OPENJARVIS_ONLY_AGENTS: Final = frozenset(
    (
        "advisors",
        "archon",
        "baseline_cloud",
        "baseline_local",
        "conductor",
        "deep_research",
        "mini_swe_agent",
        "minions",
        "morning_digest",
        "proactive",
        "skillorchestra",
        "toolorchestra",
    )
)
"""OpenJarvis's agents that jarvis does not have: as ``[agent] default_agent`` they are
reported and ignored (the default stays ``simple``) instead of refusing every question."""

OPENJARVIS_SANDBOX_IMAGE: Final = "openjarvis-sandbox:latest"
"""OpenJarvis's sandbox image, which does not speak jarvis's sandbox protocol."""

PASSED_THROUGH: Final[tuple[str, ...]] = ("tools.mcp", "mcp")
"""Kept as they are for the MCP client (typed on the configuration, not acted on here)."""
JARVIS_ENGINES: Final = ("ollama", "vllm", "openai", "llamacpp")


SHARED_SECTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "skills": ("paths",),
    "traces": ("enabled", "db_path", "content", "max_days", "max_mb"),
    "telemetry": ("enabled",),
    "memory": (
        "chunk_chars",
        "chunk_overlap",
        "max_file_bytes",
        "embed",
        "embedding_threads",
        "context_top_k",
        "context_max_chars",
        "pdf_page_seconds",
        "pdf_file_seconds",
        "pdf_memory_mb",
    ),
}
"""Sections both configurations have, whose other OpenJarvis keys mean nothing here."""

WHY_SECTION: Final[Mapping[str, str]] = {
    "memory": "an OpenJarvis storage key jarvis's knowledge base does not use",
    "telemetry": "jarvis measures no GPU or energy",
}


def jarvis_engine_keys() -> tuple[str, ...]:
    return ("name", "model", "timeout", "max_retries", *JARVIS_ENGINES)


OPENJARVIS_ONLY_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "engine.llamacpp": ("host", "binary_path"),
    "agent": ("objective",),
    "tools.storage": tuple(_STORAGE),
    "server": ("agent", "model"),
    "memory_files": ("nudge_interval",),
    "system_prompt": ("prefix",),
    "sandbox": ("enabled", "workspace", "wasm_fuel_limit", "wasm_memory_limit_mb"),
    "sessions": ("enabled", "max_age_hours", "consolidation_threshold", "db_path"),
}
"""Keys OpenJarvis has in a section jarvis also has, with no meaning in jarvis."""

WHY_KEY: Final[Mapping[str, str]] = {
    "engine.llamacpp.host": "jarvis's llamacpp engine is embedded; an OpenJarvis llama.cpp "
    'server is reached with [engine] default = "llamacpp"',
    "agent.objective": "used by OpenJarvis's routing only",
    "sessions.db_path": "jarvis's session store is [sessions] path (another schema)",
    "sandbox.enabled": "the sandbox is used by -a sandboxed",
    "server.agent": "jarvis serve's endpoints name their agent per request",
    "memory_files.nudge_interval": "jarvis does not nudge",
    "telemetry.db_path": "jarvis stats reads the trace store ([traces] db_path)",
    "engine.llamacpp.binary_path": "jarvis's llamacpp engine is embedded: it starts no "
    "llama.cpp server",
}
