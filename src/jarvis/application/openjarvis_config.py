"""Reading an OpenJarvis ``config.toml``: its keys that mean something here, and the rest named.

jarvis and OpenJarvis share ``~/.openjarvis/config.toml``. A file written for OpenJarvis is
translated into jarvis's own keys before it is validated (:func:`translate`):

* a key with the same meaning under another name is *read as* jarvis's key
  (``[intelligence] default_model`` as ``[engine] model``); when the file also sets jarvis's
  own key, jarvis's wins and the OpenJarvis key is reported as *overridden*;
* a section or key that jarvis does not implement (``[learning]``, ``[telemetry]``, engines
  it has no adapter for...) is removed and reported as *ignored*, never an error;
* ``[tools.mcp]`` and ``[mcp]`` are kept as they are (*passed through*) for the MCP client;
* OpenJarvis's older flat engine keys (``[engine] ollama_host``) are read as the nested
  key they stand for (``[engine.ollama] host``), which wins when the file sets both;
* anything else is left for validation, which refuses a key that is in neither vocabulary
  and suggests the nearest known one (:func:`suggest`); a value translation cannot read
  (``[engine] default = ["ollama"]``) is :class:`InvalidValue`.

Every decision is a :class:`ConfigNote`, printed by ``jarvis config check`` and once by
``--verbose``. The module only transforms plain data (no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast

from jarvis.application.dotted_keys import (
    Table,
    file_keys,
    get_key,
    pop_key,
    pop_path,
    set_key,
    split_key,
)
from jarvis.application.openjarvis_keys import (
    ANY,
    FLAT_ENGINE_KEYS,
    JARVIS_ENGINES,
    NOT_IMPLEMENTED,
    OPENAI_COMPATIBLE_ENGINES,
    OPENJARVIS_KEYS,
    OPENJARVIS_ONLY_AGENTS,
    OPENJARVIS_ONLY_KEYS,
    OPENJARVIS_ONLY_TOOLS,
    OPENJARVIS_SANDBOX_IMAGE,
    OPENJARVIS_TOOL_NAMES,
    OPERATIVE_OWN_TOOLS,
    PASSED_THROUGH,
    SHARED_SECTIONS,
    WHY_KEY,
    WHY_SECTION,
    jarvis_engine_keys,
)
from jarvis.domain.errors import shown

__all__ = [
    "ANY",
    "OPENJARVIS_KEYS",
    "OPENJARVIS_SANDBOX_IMAGE",
    "ConfigNote",
    "InvalidValue",
    "file_keys",
    "note_for",
    "suggest",
    "translate",
]
"""The vocabulary and the table helpers are re-exported for the callers that read a file
with :func:`translate` and then check its keys."""


@dataclass(frozen=True, slots=True)
class ConfigNote:
    """What became of one key of the file."""

    key: str
    """The dotted key as the file writes it (``intelligence.default_model``)."""
    kind: Literal["read_as", "overridden", "ignored", "passed_through"]
    detail: str
    """The jarvis key it was read as (``read_as``), the key that won (``overridden``), or
    why it is ignored."""
    remark: str = ""
    """What else to know (a default that differs from OpenJarvis's)."""

    def describe(self) -> str:
        """One line for ``jarvis config check`` (a long key cut, see :func:`shown`)."""
        key = shown(self.key)
        if self.kind == "read_as":
            line = f"{key}: read as {self.detail}"
        elif self.kind == "overridden":
            line = f"{key}: not used, {self.detail} is set and wins"
        elif self.kind == "passed_through":
            line = f"{key}: kept for {self.detail}"
        else:
            line = f"{key}: ignored ({self.detail})"
        return f"{line}; {self.remark}" if self.remark else line


class InvalidValue(ValueError):
    """A value of the file that translation cannot read (``[engine] default = ["ollama"]``):
    the caller reports it as an invalid config file, naming ``key``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{shown(key)}: {problem}")
        self.key = key
        self.problem = problem


def _kind(value: object) -> str:
    """What a TOML value is, in TOML's words."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time" if not isinstance(value, str) else "a string"


def _string(key: str, value: object, what: str) -> str:
    """``value`` when it is a string, else :class:`InvalidValue` saying it must be ``what``."""
    if not isinstance(value, str):
        raise InvalidValue(key, f"must be {what}, not {_kind(value)}")
    return value


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


MEMORY_CONTEXT_REMARK: Final = (
    "jarvis's default is off, OpenJarvis's on: it sends passages of your documents to the "
    "engine with every question, so jarvis does it only when asked"
)
"""Why ``[agent] context_from_memory`` defaults to off here (told with the keys OpenJarvis
reads as it, whose default there is on)."""

_RENAMES: Final[tuple[tuple[str, str, Callable[[object], object]], ...]] = (
    ("intelligence.default_model", "engine.model", _same),
    ("intelligence.temperature", "agent.temperature", _same),
    ("intelligence.max_tokens", "agent.max_tokens", _same),
    ("agent.default_agent", "agent.default", _same),
    ("agent.tools", "tools.enabled", _comma_list),
    ("agent.default_tools", "tools.enabled", _comma_list),
    ("agent.default_system_prompt", "agent.system_prompt", _same),
    ("engine.vllm.host", "engine.vllm.base_url", _openai_url),
    # OpenJarvis applies [memory] (its older name of [tools.storage]) after [tools.storage]
    ("memory.db_path", "tools.retrieval.db_path", _same),
    ("tools.storage.db_path", "tools.retrieval.db_path", _same),
    # and moves [memory] context_injection, then [tools.storage]'s, unless [agent] has it
    ("memory.context_injection", "agent.context_from_memory", _same),
    ("tools.storage.context_injection", "agent.context_from_memory", _same),
    ("tools.searxng_url", "tools.web_search.provider_url", _same),
    ("tools.file_allowed_directories", "tools.file_read.roots", _comma_list),
)
"""OpenJarvis key, jarvis key, conversion: the same setting under two names."""


def translate(raw: Mapping[str, object]) -> tuple[Table, tuple[ConfigNote, ...]]:
    """``raw`` (a parsed file) with OpenJarvis's keys translated or removed, and what was done.

    ``raw`` itself is not modified.
    """
    import copy

    original = raw
    data = copy.deepcopy(dict(raw))
    notes: list[ConfigNote] = []
    moved = _move_flat_engine_keys(data, original, notes)
    _translate_engine(data, original, notes)
    for source, target, convert in _RENAMES:
        _rename(data, original, notes, (source, target, convert))
    _translate_tool_list(data, notes)
    _drop_openjarvis_defaults(data, original, notes)
    for key in PASSED_THROUGH:
        if get_key(data, key)[0]:
            notes.append(ConfigNote(key, "passed_through", "the MCP client"))
    _drop_unimplemented(data, notes)
    _name_flat_engine_keys(moved, original, notes)
    notes[:] = [
        ConfigNote(n.key, n.kind, n.detail, MEMORY_CONTEXT_REMARK)
        if n.kind == "read_as" and n.detail == "agent.context_from_memory"
        else n
        for n in notes
    ]
    return data, tuple(notes)


def _move_flat_engine_keys(
    data: Table, original: Mapping[str, object], notes: list[ConfigNote]
) -> dict[str, str]:
    """``[engine] ollama_host`` (OpenJarvis's older flat keys) moved to ``[engine.ollama]
    host``, unless the file sets that; the moved keys, nested key to flat key."""
    found, engine = get_key(data, "engine")
    if not found or not isinstance(engine, dict):
        return {}
    moved: dict[str, str] = {}
    for flat in [name for name in FLAT_ENGINE_KEYS if name in engine]:
        flat_key, nested_key = f"engine.{flat}", f"engine.{FLAT_ENGINE_KEYS[flat]}"
        what = "a path (a string)" if flat.endswith("_path") else "a URL (a string)"
        value = _string(flat_key, pop_path(data, ["engine", flat]), what)
        if get_key(original, nested_key)[0]:
            notes.append(ConfigNote(flat_key, "overridden", nested_key))
        elif set_key(data, nested_key, value):
            moved[nested_key] = flat_key
    return moved


def _name_flat_engine_keys(
    moved: Mapping[str, str], original: Mapping[str, object], notes: list[ConfigNote]
) -> None:
    """The notes about a moved key named by the flat key the file holds."""
    for nested, flat in moved.items():
        note = note_for(nested, tuple(notes))
        if note is None:  # jarvis's own key ([engine.ollama] host): read as it is
            notes.append(ConfigNote(flat, "read_as", nested))
        elif note.key == nested or not get_key(original, note.key)[0]:
            # about the moved key alone (or a table only the move made): renamed
            renamed = note.key
            notes[:] = [
                ConfigNote(flat, n.kind, n.detail) if n.key == renamed else n for n in notes
            ]
        else:  # the file's own table, dropped with the moved key in it
            notes.append(ConfigNote(flat, note.kind, note.detail))


def _rename(
    data: Table,
    original: Mapping[str, object],
    notes: list[ConfigNote],
    rename: tuple[str, str, Callable[[object], object]],
) -> None:
    """Read OpenJarvis's ``source`` as jarvis's ``target``, unless the file sets that."""
    source, target, convert = rename
    found, _ = get_key(data, source)
    if not found:
        return
    value = pop_key(data, source)
    if get_key(original, target)[0]:
        notes.append(ConfigNote(source, "overridden", target))
    elif get_key(data, target)[0]:
        # an earlier OpenJarvis key already set it (agent.tools before default_tools)
        winner = next((n.key for n in notes if n.kind == "read_as" and n.detail == target), target)
        notes.append(ConfigNote(source, "overridden", winner))
    elif set_key(data, target, convert(value)):
        notes.append(ConfigNote(source, "read_as", target))


def _tool_list_source(notes: list[ConfigNote]) -> str:
    """The file's key ``[tools] enabled`` came from (``agent.tools``...)."""
    return next(
        (n.key for n in notes if n.kind == "read_as" and n.detail == "tools.enabled"),
        "tools.enabled",
    )


def _rename_tools(data: Table, notes: list[ConfigNote], enabled: list[object]) -> list[object]:
    """``enabled`` with OpenJarvis's names of jarvis's tools (``memory_search``) written as
    jarvis's (``retrieval``, once), noted; set in ``data`` when one was renamed."""
    renamed = list(
        dict.fromkeys(n for n in enabled if isinstance(n, str) and n in OPENJARVIS_TOOL_NAMES)
    )
    if not renamed:
        return enabled
    targets = {OPENJARVIS_TOOL_NAMES[name] for name in renamed}
    result: list[object] = []
    for name in enabled:
        if isinstance(name, str):
            name = OPENJARVIS_TOOL_NAMES.get(name, name)
            if name in targets and name in result:
                continue
        result.append(name)
    set_key(data, "tools.enabled", result)
    groups = {t: [n for n in renamed if OPENJARVIS_TOOL_NAMES[n] == t] for t in sorted(targets)}
    said = "; ".join(
        ", ".join(names) + f": OpenJarvis's name{'s' if len(names) > 1 else ''} of {target}"
        for target, names in groups.items()
    )
    notes.append(ConfigNote(_tool_list_source(notes), "read_as", f"tools.enabled ({said})"))
    return result


def _translate_tool_list(data: Table, notes: list[ConfigNote]) -> None:
    """``[tools] enabled`` as a list, with OpenJarvis's names of jarvis's tools renamed and
    without the OpenJarvis tools jarvis does not have."""
    found, enabled = get_key(data, "tools.enabled")
    if found and isinstance(enabled, str):
        set_key(data, "tools.enabled", _comma_list(enabled))
        notes.append(ConfigNote("tools.enabled", "read_as", "tools.enabled (a comma list)"))
    found, enabled = get_key(data, "tools.enabled")
    if not found or not isinstance(enabled, list):
        return
    enabled = _rename_tools(data, notes, enabled)
    left_out = OPENJARVIS_ONLY_TOOLS | OPERATIVE_OWN_TOOLS
    dropped = list(dict.fromkeys(n for n in enabled if isinstance(n, str) and n in left_out))
    if not dropped:
        return  # (a name that is not a string is left for validation to refuse)
    kept = [name for name in enabled if name not in dropped]
    if kept:
        set_key(data, "tools.enabled", kept)
    else:
        pop_key(data, "tools.enabled")
    reasons = []
    if absent := [name for name in dropped if name in OPENJARVIS_ONLY_TOOLS]:
        reasons.append("OpenJarvis tools jarvis does not have: " + ", ".join(absent))
    if own := [name for name in dropped if name in OPERATIVE_OWN_TOOLS]:
        reasons.append(", ".join(own) + ": the operative agents always have their own")
    why = "; ".join(reasons)
    notes.append(
        ConfigNote(
            _tool_list_source(notes),
            "ignored",
            f"in part: {why}" if kept else f"{why}; so no tool is enabled by default",
        )
    )


def _drop_openjarvis_defaults(
    data: Table, original: Mapping[str, object], notes: list[ConfigNote]
) -> None:
    """Remove the values OpenJarvis writes that name what jarvis does not have (one of its
    own agents as the default, an empty Ollama host, its own sandbox image)."""
    found, default = get_key(data, "agent.default")
    if (
        found
        and isinstance(default, str)
        and default in OPENJARVIS_ONLY_AGENTS
        and not get_key(original, "agent.default")[0]
    ):
        pop_key(data, "agent.default")
        notes[:] = [
            n for n in notes if n != ConfigNote("agent.default_agent", "read_as", "agent.default")
        ]
        notes.append(
            ConfigNote(
                "agent.default_agent",
                "ignored",
                f"jarvis has no {shown(repr(default))} agent; the default agent (simple) applies",
            )
        )
    found, host = get_key(data, "engine.ollama.host")
    if found and host == "":
        pop_key(data, "engine.ollama.host")
        notes.append(
            ConfigNote("engine.ollama.host", "ignored", "empty: OLLAMA_HOST or the default applies")
        )
    found, image = get_key(data, "sandbox.image")
    if found and image == OPENJARVIS_SANDBOX_IMAGE:
        pop_key(data, "sandbox.image")
        notes.append(
            ConfigNote("sandbox.image", "ignored", "OpenJarvis's own image; jarvis builds its own")
        )


def _translate_engine(data: Table, original: Mapping[str, object], notes: list[ConfigNote]) -> None:
    """``[engine] default``: a jarvis engine by name, an OpenJarvis OpenAI-compatible server
    as jarvis's ``openai`` engine at its host, anything else ignored."""
    found, default = get_key(data, "engine.default")
    if not found:
        return
    default = pop_key(data, "engine.default")
    default = _string("engine.default", default, 'an engine\'s name, such as "ollama"')
    if get_key(original, "engine.name")[0]:
        notes.append(ConfigNote("engine.default", "overridden", "engine.name"))
        return
    if default in ("ollama", "vllm", "openai"):
        set_key(data, "engine.name", default)
        notes.append(ConfigNote("engine.default", "read_as", "engine.name"))
        return
    if default in OPENAI_COMPATIBLE_ENGINES:
        host_key = f"engine.{default}.host"
        has_host, host = get_key(data, host_key)
        if has_host:
            pop_key(data, host_key)
            notes.append(ConfigNote(host_key, "read_as", "engine.openai.base_url"))
        url = (
            (host.strip().rstrip("/") if default == "uzu" else _openai_url(host))
            if isinstance(host, str) and host.strip()
            else OPENAI_COMPATIBLE_ENGINES[default]
        )
        set_key(data, "engine.name", "openai")
        notes.append(
            ConfigNote("engine.default", "read_as", f"engine.name = openai (the {default} server)")
        )
        if get_key(original, "engine.openai.base_url")[0]:
            notes.append(ConfigNote(host_key, "overridden", "engine.openai.base_url"))
        else:
            set_key(data, "engine.openai.base_url", url)
        return
    notes.append(
        ConfigNote(
            "engine.default",
            "ignored",
            f"jarvis has no {shown(repr(default))} engine; [engine] name (default auto) applies",
        )
    )


def _drop_unimplemented(data: Table, notes: list[ConfigNote]) -> None:
    """Remove what jarvis does not implement, one note per section or key."""
    for section, known in SHARED_SECTIONS.items():
        found, table = get_key(data, section)
        if found and isinstance(table, dict):
            for key in [k for k in cast("Table", table) if k not in known]:
                pop_path(data, [*split_key(section), key])
                why = WHY_KEY.get(f"{section}.{key}") or WHY_SECTION.get(section, "no meaning here")
                notes.append(ConfigNote(f"{section}.{key}", "ignored", why))
    for key, why in NOT_IMPLEMENTED.items():
        if get_key(data, key)[0]:
            pop_key(data, key)
            notes.append(ConfigNote(key, "ignored", why))
    found, engine = get_key(data, "engine")
    if found and isinstance(engine, dict):
        for name in list(cast("Table", engine)):
            value = cast("Table", engine)[name]
            if name in JARVIS_ENGINES or not isinstance(value, dict):
                continue
            if name in cast("Mapping[str, object]", OPENJARVIS_KEYS["engine"]):
                pop_path(data, ["engine", name])
                notes.append(ConfigNote(f"engine.{name}", "ignored", "not the engine in use"))
            elif name not in jarvis_engine_keys():
                pop_path(data, ["engine", name])
                notes.append(ConfigNote(f"engine.{name}", "ignored", "jarvis has no such engine"))
    # keys of OpenJarvis inside sections jarvis also has, without a meaning here
    for section, keys in OPENJARVIS_ONLY_KEYS.items():
        for key in keys:
            dotted = f"{section}.{key}"
            if get_key(data, dotted)[0]:
                pop_key(data, dotted)
                notes.append(ConfigNote(dotted, "ignored", WHY_KEY.get(dotted, "no meaning here")))
    found, intelligence = get_key(data, "intelligence")
    if found and isinstance(intelligence, dict):
        for key in list(cast("Table", intelligence)):
            if key in cast("Mapping[str, object]", OPENJARVIS_KEYS["intelligence"]):
                pop_path(data, ["intelligence", key])
                notes.append(ConfigNote(f"intelligence.{key}", "ignored", "no meaning here"))


def suggest(key: str, candidates: tuple[str, ...]) -> str | None:
    """The nearest of ``candidates`` to a mistyped ``key``, if any is close."""
    import difflib

    matches = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def note_for(key: str, notes: tuple[ConfigNote, ...]) -> ConfigNote | None:
    """The note that covers dotted ``key`` (its own, or its section's)."""
    best: ConfigNote | None = None
    for note in notes:
        if (key == note.key or key.startswith(note.key + ".")) and (
            best is None or len(note.key) > len(best.key)
        ):
            best = note
    return best
