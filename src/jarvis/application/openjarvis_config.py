"""Reading an OpenJarvis ``config.toml``: its keys that mean something here, and the rest named.

jarvis and OpenJarvis share ``~/.openjarvis/config.toml``. A file written for OpenJarvis is
translated into jarvis's own keys before it is validated (:func:`translate`):

* a key with the same meaning under another name is *read as* jarvis's key
  (``[intelligence] default_model`` as ``[engine] model``); when the file also sets jarvis's
  own key, jarvis's wins and the OpenJarvis key is reported as *overridden*;
* a section or key that jarvis does not implement (``[learning]``, ``[telemetry]``, engines
  it has no adapter for...) is removed and reported as *ignored*, never an error;
* ``[tools.mcp]`` and ``[mcp]`` are kept as they are (*passed through*) for the MCP client;
* anything else is left for validation, which refuses a key that is in neither vocabulary
  and suggests the nearest known one (:func:`suggest`).

Every decision is a :class:`ConfigNote`, printed by ``jarvis config check`` and once by
``--verbose``. The module only transforms plain data (no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast

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
    "server": dict.fromkeys(("host", "port", "agent", "model", "workers", "cors_origins")),
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


@dataclass(frozen=True, slots=True)
class ConfigNote:
    """What became of one key of the file."""

    key: str
    """The dotted key as the file writes it (``intelligence.default_model``)."""
    kind: Literal["read_as", "overridden", "ignored", "passed_through"]
    detail: str
    """The jarvis key it was read as (``read_as``), the key that won (``overridden``), or
    why it is ignored."""

    def describe(self) -> str:
        """One line for ``jarvis config check``."""
        if self.kind == "read_as":
            return f"{self.key}: read as {self.detail}"
        if self.kind == "overridden":
            return f"{self.key}: not used, {self.detail} is set and wins"
        if self.kind == "passed_through":
            return f"{self.key}: kept for {self.detail}"
        return f"{self.key}: ignored ({self.detail})"


Table = dict[str, object]


def _comma_list(value: object) -> object:
    """OpenJarvis writes tool lists as ``"a,b"`` or ``["a", "b"]``; jarvis takes a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _openai_url(value: object) -> object:
    """An OpenJarvis OpenAI-compatible host (``http://h:8000``) as a base URL (``.../v1``)."""
    if isinstance(value, str) and value.strip():
        url = value.strip().rstrip("/")
        if "://" not in url:
            url = "http://" + url
        return url if url.endswith("/v1") else url + "/v1"
    return value


def _same(value: object) -> object:
    return value


_RENAMES: Final[tuple[tuple[str, str, Callable[[object], object]], ...]] = (
    ("intelligence.default_model", "engine.model", _same),
    ("intelligence.temperature", "agent.temperature", _same),
    ("intelligence.max_tokens", "agent.max_tokens", _same),
    ("agent.default_agent", "agent.default", _same),
    ("agent.tools", "tools.enabled", _comma_list),
    ("agent.default_tools", "tools.enabled", _comma_list),
    ("agent.default_system_prompt", "agent.system_prompt", _same),
    ("engine.vllm.host", "engine.vllm.base_url", _openai_url),
    ("tools.storage.db_path", "tools.retrieval.db_path", _same),
    ("tools.searxng_url", "tools.web_search.provider_url", _same),
    ("tools.file_allowed_directories", "tools.file_read.roots", _comma_list),
)
"""OpenJarvis key, jarvis key, conversion: the same setting under two names."""

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
        "memory_retrieve",
        "memory_search",
        "memory_store",
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
"""OpenJarvis's built-in tools that jarvis does not have (``memory_store`` is given to
every operator tick by itself): left out of ``[tools] enabled`` and reported, so that an
OpenJarvis tool list does not make every tool-using question a usage error."""

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

_PASSED_THROUGH: Final[tuple[str, ...]] = ("tools.mcp", "mcp")
"""Kept as they are for the MCP client (typed on the configuration, not acted on here)."""


def _split(dotted: str) -> list[str]:
    return dotted.split(".")


def _get(raw: Mapping[str, object], dotted: str) -> tuple[bool, object]:
    node: object = raw
    for part in _split(dotted):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = cast("Mapping[str, object]", node)[part]
    return True, node


def _pop(raw: Table, dotted: str) -> object:
    *parents, last = _split(dotted)
    node: object = raw
    for part in parents:
        node = cast("Table", node)[part]
    table = cast("Table", node)
    value = table.pop(last)
    _prune(raw, parents)
    return value


def _prune(raw: Table, parents: list[str]) -> None:
    """Drop the tables along ``parents`` that the translation emptied."""
    for depth in range(len(parents), 0, -1):
        found, node = _get(raw, ".".join(parents[:depth]))
        if found and isinstance(node, dict) and not node:
            _pop_plain(raw, parents[:depth])
        else:
            return


def _pop_plain(raw: Table, path: list[str]) -> None:
    node: object = raw
    for part in path[:-1]:
        node = cast("Table", node)[part]
    cast("Table", node).pop(path[-1], None)


def _set(raw: Table, dotted: str, value: object) -> bool:
    """Set ``dotted`` unless a table on the way is not a table (left to validation)."""
    *parents, last = _split(dotted)
    node = raw
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return False
        node = cast("Table", child)
    node[last] = value
    return True


def translate(raw: Mapping[str, object]) -> tuple[Table, tuple[ConfigNote, ...]]:
    """``raw`` (a parsed file) with OpenJarvis's keys translated or removed, and what was done.

    ``raw`` itself is not modified.
    """
    import copy

    original = raw
    data = copy.deepcopy(dict(raw))
    notes: list[ConfigNote] = []

    def rename(source: str, target: str, convert: Callable[[object], object]) -> None:
        found, _ = _get(data, source)
        if not found:
            return
        value = _pop(data, source)
        if _get(original, target)[0]:
            notes.append(ConfigNote(source, "overridden", target))
        elif _get(data, target)[0]:
            # an earlier OpenJarvis key already set it (agent.tools before default_tools)
            notes.append(ConfigNote(source, "overridden", target))
        elif _set(data, target, convert(value)):
            notes.append(ConfigNote(source, "read_as", target))

    _translate_engine(data, original, notes)
    for source, target, convert in _RENAMES:
        rename(source, target, convert)
    found, enabled = _get(data, "tools.enabled")
    if found and isinstance(enabled, str):
        _set(data, "tools.enabled", _comma_list(enabled))
        notes.append(ConfigNote("tools.enabled", "read_as", "tools.enabled (a comma list)"))
    found, enabled = _get(data, "tools.enabled")
    if found and isinstance(enabled, list):
        missing = [name for name in enabled if name in OPENJARVIS_ONLY_TOOLS]
        if missing:
            _set(data, "tools.enabled", [n for n in enabled if n not in OPENJARVIS_ONLY_TOOLS])
            notes.append(
                ConfigNote(
                    "tools.enabled",
                    "ignored",
                    "in part: OpenJarvis tools jarvis does not have: "
                    + ", ".join(map(str, missing)),
                )
            )
    found, default = _get(data, "agent.default")
    if found and default in OPENJARVIS_ONLY_AGENTS and not _get(original, "agent.default")[0]:
        _pop(data, "agent.default")
        notes[:] = [
            n for n in notes if n != ConfigNote("agent.default_agent", "read_as", "agent.default")
        ]
        notes.append(
            ConfigNote(
                "agent.default_agent",
                "ignored",
                f"jarvis has no {default!r} agent; the default agent (simple) applies",
            )
        )
    found, host = _get(data, "engine.ollama.host")
    if found and host == "":
        _pop(data, "engine.ollama.host")
        notes.append(
            ConfigNote("engine.ollama.host", "ignored", "empty: OLLAMA_HOST or the default applies")
        )
    found, image = _get(data, "sandbox.image")
    if found and image == OPENJARVIS_SANDBOX_IMAGE:
        _pop(data, "sandbox.image")
        notes.append(
            ConfigNote("sandbox.image", "ignored", "OpenJarvis's own image; jarvis builds its own")
        )
    for key in _PASSED_THROUGH:
        if _get(data, key)[0]:
            notes.append(ConfigNote(key, "passed_through", "the MCP client"))
    _drop_unimplemented(data, notes)
    return data, tuple(notes)


def _translate_engine(data: Table, original: Mapping[str, object], notes: list[ConfigNote]) -> None:
    """``[engine] default``: a jarvis engine by name, an OpenJarvis OpenAI-compatible server
    as jarvis's ``openai`` engine at its host, anything else ignored."""
    found, default = _get(data, "engine.default")
    if not found:
        return
    _pop(data, "engine.default")
    if _get(original, "engine.name")[0]:
        notes.append(ConfigNote("engine.default", "overridden", "engine.name"))
        return
    if default in ("ollama", "vllm", "openai"):
        _set(data, "engine.name", default)
        notes.append(ConfigNote("engine.default", "read_as", "engine.name"))
        return
    if isinstance(default, str) and default in OPENAI_COMPATIBLE_ENGINES:
        host_key = f"engine.{default}.host"
        has_host, host = _get(data, host_key)
        if has_host:
            _pop(data, host_key)
            notes.append(ConfigNote(host_key, "read_as", "engine.openai.base_url"))
        url = (
            (host.strip().rstrip("/") if default == "uzu" else _openai_url(host))
            if isinstance(host, str) and host.strip()
            else OPENAI_COMPATIBLE_ENGINES[default]
        )
        _set(data, "engine.name", "openai")
        notes.append(
            ConfigNote("engine.default", "read_as", f"engine.name = openai (the {default} server)")
        )
        if _get(original, "engine.openai.base_url")[0]:
            notes.append(ConfigNote(host_key, "overridden", "engine.openai.base_url"))
        else:
            _set(data, "engine.openai.base_url", url)
        return
    notes.append(
        ConfigNote(
            "engine.default",
            "ignored",
            f"jarvis has no {default!r} engine; [engine] name (default auto) applies",
        )
    )


_JARVIS_ENGINES: Final = ("ollama", "vllm", "openai", "llamacpp")


_SHARED_SECTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "skills": ("paths",),
    "traces": ("enabled", "db_path", "content", "max_days", "max_mb"),
    "telemetry": ("enabled",),
    "memory": (
        "chunk_chars",
        "chunk_overlap",
        "max_file_bytes",
        "embed",
        "context_top_k",
        "context_max_chars",
    ),
}
"""Sections both configurations have, whose other OpenJarvis keys mean nothing here."""

_WHY_SECTION: Final[Mapping[str, str]] = {
    "memory": "jarvis's memory database is [tools.retrieval] db_path",
    "telemetry": "jarvis measures no GPU or energy",
}


def _drop_unimplemented(data: Table, notes: list[ConfigNote]) -> None:
    """Remove what jarvis does not implement, one note per section or key."""
    for section, known in _SHARED_SECTIONS.items():
        found, table = _get(data, section)
        if found and isinstance(table, dict):
            for key in [k for k in cast("Table", table) if k not in known]:
                _pop(data, f"{section}.{key}")
                why = _WHY_KEY.get(f"{section}.{key}") or _WHY_SECTION.get(
                    section, "no meaning here"
                )
                notes.append(ConfigNote(f"{section}.{key}", "ignored", why))
    for key, why in NOT_IMPLEMENTED.items():
        if _get(data, key)[0]:
            _pop(data, key)
            notes.append(ConfigNote(key, "ignored", why))
    found, engine = _get(data, "engine")
    if found and isinstance(engine, dict):
        for name in list(cast("Table", engine)):
            value = cast("Table", engine)[name]
            if name in _JARVIS_ENGINES or not isinstance(value, dict):
                continue
            if name in cast("Mapping[str, object]", OPENJARVIS_KEYS["engine"]):
                _pop(data, f"engine.{name}")
                notes.append(ConfigNote(f"engine.{name}", "ignored", "not the engine in use"))
            elif name not in _jarvis_engine_keys():
                _pop(data, f"engine.{name}")
                notes.append(ConfigNote(f"engine.{name}", "ignored", "jarvis has no such engine"))
    # keys of OpenJarvis inside sections jarvis also has, without a meaning here
    for section, keys in _OPENJARVIS_ONLY.items():
        for key in keys:
            dotted = f"{section}.{key}"
            if _get(data, dotted)[0]:
                _pop(data, dotted)
                notes.append(ConfigNote(dotted, "ignored", _WHY_KEY.get(dotted, "no meaning here")))
    found, intelligence = _get(data, "intelligence")
    if found and isinstance(intelligence, dict):
        for key in list(cast("Table", intelligence)):
            if key in cast("Mapping[str, object]", OPENJARVIS_KEYS["intelligence"]):
                _pop(data, f"intelligence.{key}")
                notes.append(ConfigNote(f"intelligence.{key}", "ignored", "no meaning here"))


def _jarvis_engine_keys() -> tuple[str, ...]:
    return ("name", "model", "timeout", "max_retries", *_JARVIS_ENGINES)


_OPENJARVIS_ONLY: Final[Mapping[str, tuple[str, ...]]] = {
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

_WHY_KEY: Final[Mapping[str, str]] = {
    "engine.llamacpp.host": "jarvis's llamacpp engine is embedded; an OpenJarvis llama.cpp "
    'server is reached with [engine] default = "llamacpp"',
    "agent.objective": "used by OpenJarvis's routing only",
    "sessions.db_path": "jarvis's session store is [sessions] path (another schema)",
    "sandbox.enabled": "the sandbox is used by -a sandboxed",
    "server.agent": "jarvis serve's endpoints name their agent per request",
    "memory_files.nudge_interval": "jarvis does not nudge",
    "telemetry.db_path": "jarvis stats reads the trace store ([traces] db_path)",
}


def suggest(key: str, candidates: tuple[str, ...]) -> str | None:
    """The nearest of ``candidates`` to a mistyped ``key``, if any is close."""
    import difflib

    matches = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def file_keys(raw: Mapping[str, object], prefix: str = "") -> list[str]:
    """Every leaf key of a parsed file, dotted, in file order (tables of tables descended)."""
    keys: list[str] = []
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            keys.extend(file_keys(cast("Mapping[str, object]", value), dotted + "."))
        else:
            keys.append(dotted)
    return keys


def note_for(key: str, notes: tuple[ConfigNote, ...]) -> ConfigNote | None:
    """The note that covers dotted ``key`` (its own, or its section's)."""
    best: ConfigNote | None = None
    for note in notes:
        if (key == note.key or key.startswith(note.key + ".")) and (
            best is None or len(note.key) > len(best.key)
        ):
            best = note
    return best
