"""Loading the configuration: file, then environment, then options, validated once.

The config dir is ``$OPENJARVIS_HOME``, else ``$XDG_DATA_HOME/openjarvis``, else
``~/.openjarvis``; the file is ``$OPENJARVIS_CONFIG`` when set, else
``<config dir>/config.toml``. A missing default file means defaults. A file written for
OpenJarvis is read too: its keys are translated first
(:mod:`jarvis.application.openjarvis_config`), and what was read as what is returned with
the configuration (:func:`read_config`). The files the file names for its values
(``[agent] system_prompt_path``, ``[tools.mcp] servers``) are read then too.
``OLLAMA_HOST``, ``VLLM_HOST``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` override the
file's values for those engines; command-line options (or SDK arguments) override both.
Everything is merged first and validated once, so an invalid value is reported with the
file and the dotted key it came from.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from jarvis.application.dotted_keys import MAX_SHOWN_PATH
from jarvis.application.engine_names import ENGINE_NAMES, ENGINE_URL_KEYS
from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.url_masks import mask_url, redact_urls
from jarvis.entrypoints.bounded_files import read_regular_file
from jarvis.entrypoints.mcp_servers_file import with_mcp_servers_file

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig
    from jarvis.application.openjarvis_config import ConfigNote

MAX_CONFIG_FILE_BYTES = 1024 * 1024
"""A ``config.toml`` larger than this is refused (read with a cap, not trusted by its size)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOverrides:
    """Engine choices given on the command line or to the SDK; ``None`` = keep."""

    engine: str | None = None
    base_url: str | None = None
    model: str | None = None


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$OPENJARVIS_HOME``, else ``$XDG_DATA_HOME/openjarvis``, else ``~/.openjarvis``."""
    env = os.environ if env is None else env
    if home := env.get("OPENJARVIS_HOME"):
        return Path(home).expanduser()
    if xdg := env.get("XDG_DATA_HOME"):
        return Path(xdg).expanduser() / "openjarvis"
    return Path.home() / ".openjarvis"


def config_file(env: Mapping[str, str] | None = None) -> Path:
    """Where ``config.toml`` is looked for."""
    return config_dir(env) / "config.toml"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedConfig:
    """The configuration, the file it came from and what became of the file's keys."""

    config: JarvisConfig
    file: Path
    found: bool
    """Whether the file existed (a missing default file means the defaults)."""
    raw: Mapping[str, object]
    """The file as parsed, before translation."""
    notes: tuple[ConfigNote, ...] = ()


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: EngineOverrides | None = None,
    env: Mapping[str, str] | None = None,
) -> JarvisConfig:
    """Read, merge and validate the configuration (:func:`read_config`)."""
    return read_config(path, overrides=overrides, env=env).config


def chosen_file(
    path: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[Path, str | None]:
    """The file to read and, when it was named (option or ``$OPENJARVIS_CONFIG``), by what."""
    if path is not None:
        return Path(path).expanduser(), "--config"
    if named := env.get("OPENJARVIS_CONFIG", "").strip():
        return Path(named).expanduser(), "$OPENJARVIS_CONFIG"
    return config_file(env), None


def read_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: EngineOverrides | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedConfig:
    """Read, translate, merge and validate the configuration.

    ``path`` (else ``$OPENJARVIS_CONFIG``) names the file to read; when named it must
    exist. Without either the default location is used and a missing file means the
    defaults. Raises :class:`~jarvis.domain.errors.ConfigurationError` naming the file and
    the bad key (with the nearest known key when it looks like a typo).
    """
    env = os.environ if env is None else env
    file, named_by = chosen_file(path, env)
    parsed = _read_toml(file, must_exist=named_by is not None, named_by=named_by)
    from_file = bool(parsed)
    notes: tuple[ConfigNote, ...] = ()
    raw: dict[str, object] = {}
    if from_file:
        from jarvis.application.openjarvis_config import InvalidValue, translate

        try:
            raw, notes = translate(parsed)
        except InvalidValue as exc:
            raise ConfigurationError(
                f"Invalid config file {file}: {exc}.",
                hint="Fix or remove the key named; see the configuration example in the README.",
            ) from None
        _check_unknown_keys(raw, file)
    _check_file_urls(raw, file, notes)
    _apply_environment(raw, env)
    _apply_overrides(raw, overrides or EngineOverrides())
    if not from_file:
        # only environment and option values, all strings checked here: pydantic (and its
        # import time) is needed only for a file
        from jarvis.application.config import JarvisConfig, from_data

        config = from_data(JarvisConfig, raw)
    else:
        config = _with_system_prompt_file(_validate(raw, file, notes), file)
        config = with_mcp_servers_file(config, file)
    return LoadedConfig(config=config, file=file, found=from_file, raw=parsed, notes=notes)


MAX_SYSTEM_PROMPT_BYTES = 256 * 1024
"""``[agent] system_prompt_path`` larger than this is refused."""


def _with_system_prompt_file(config: JarvisConfig, file: Path) -> JarvisConfig:
    """``[agent] system_prompt_path`` read into ``system_prompt`` (unless that is set)."""
    agent = config.agent
    if not agent.system_prompt_path or agent.system_prompt:
        return config
    from dataclasses import replace

    prompt_file = Path(agent.system_prompt_path).expanduser()
    if not prompt_file.is_absolute():
        prompt_file = file.parent / prompt_file
    from jarvis.application.tools.secret_paths import secret_rule_of_paths

    rule = secret_rule_of_paths(os.path.abspath(prompt_file), os.path.realpath(prompt_file))
    if rule is not None:  # a config copied from elsewhere would send it with every question
        raise ConfigurationError(
            f"Invalid config file {file}: agent.system_prompt_path: "
            f"{shown(str(prompt_file), MAX_SHOWN_PATH)} is a secret file (it matches {rule!r}); "
            "it is never sent to an engine.",
            hint="Point it at the prompt's own text file, or remove the key.",
        )
    try:
        data = read_regular_file(
            prompt_file,
            limit=MAX_SYSTEM_PROMPT_BYTES,
            what="prompt file",
            where=f"Invalid config file {file}: agent.system_prompt_path",
        )
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigurationError(
            f"Invalid config file {file}: agent.system_prompt_path: cannot read "
            f"{shown(str(prompt_file), MAX_SHOWN_PATH)} ({reason}).",
            hint="Point it at a readable UTF-8 text file, or remove the key.",
        ) from None
    return replace(config, agent=replace(agent, system_prompt=text.strip()))


def _check_unknown_keys(raw: Mapping[str, object], file: Path) -> None:
    """Refuse a key in neither jarvis's nor OpenJarvis's vocabulary, naming the nearest one."""
    from jarvis.application.config import JarvisConfig, section_keys
    from jarvis.application.openjarvis_config import ANY, OPENJARVIS_KEYS, file_keys, suggest

    problems: list[str] = []
    for dotted in file_keys(raw):
        parts = dotted.split(".")
        theirs: object = OPENJARVIS_KEYS
        for depth, part in enumerate(parts):
            ours = section_keys(JarvisConfig, parts[:depth])
            their_keys = tuple(theirs) if isinstance(theirs, Mapping) else ()
            if (ours is not None and part in ours) or part in their_keys:
                theirs = theirs.get(part) if isinstance(theirs, Mapping) else None
                if theirs == ANY or (
                    section_keys(JarvisConfig, parts[: depth + 1]) is None
                    and not isinstance(theirs, Mapping)
                ):
                    break  # a value of any shape, or a table jarvis does not look into
                continue
            near = suggest(shown(part), tuple(dict.fromkeys((*(ours or ()), *their_keys))))
            problem = f"{shown('.'.join(parts[: depth + 1]))}: unknown key"
            if near is not None:
                problem += f" (did you mean {shown('.'.join([*parts[:depth], near]))}?)"
            if problem not in problems:
                problems.append(problem)
            break
    if problems:
        raise ConfigurationError(
            f"Invalid config file {file}: " + _listed(problems),
            hint="Fix or remove the key named; see the configuration example in the README "
            "(jarvis config check lists how every key is read).",
        )


def _read_toml(file: Path, *, must_exist: bool, named_by: str | None = None) -> dict[str, object]:
    try:
        data = read_regular_file(file, limit=MAX_CONFIG_FILE_BYTES, what="config file")
        text = data.decode("utf-8")
    except FileNotFoundError:
        if must_exist:
            raise ConfigurationError(
                f"Config file not found: {file}"
                + (f" (named by {named_by})" if named_by == "$OPENJARVIS_CONFIG" else ""),
                hint="Create it, or leave the path out to use the default location.",
            ) from None
        return {}
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"Cannot read config file {file}: {reason}.") from exc
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"Cannot read config file {file}: not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"Invalid config file {file}: not valid TOML ({exc}).",
            hint="Fix the syntax; see the configuration example in the README.",
        ) from exc
    except RecursionError:
        raise ConfigurationError(
            f"Invalid config file {file}: nested deeper than TOML can be read here."
        ) from None
    if _deeper_than(raw, MAX_CONFIG_DEPTH):
        raise ConfigurationError(
            f"Invalid config file {file}: tables or arrays nested more than "
            f"{MAX_CONFIG_DEPTH} deep (no jarvis setting is)."
        )
    return raw


MAX_CONFIG_DEPTH = 32
"""The deepest nesting of tables and arrays a config file may have (jarvis's own go to 5)."""


def _deeper_than(raw: dict[str, object], limit: int) -> bool:
    """Whether ``raw`` nests past ``limit`` (iterative: no recursion on a hostile file)."""
    pending: list[tuple[object, int]] = [(raw, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
    return False


def _section(raw: dict[str, object], *keys: str) -> dict[str, object]:
    """The nested table at ``keys``, created when absent (a non-table is left to validation)."""
    node = raw
    for key in keys:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return {}  # validation will report the bad value under its own key
        node = cast("dict[str, object]", child)
    return node


def normalize_ollama_host(value: str) -> str:
    """``OLLAMA_HOST`` as Ollama reads it: a bare ``host[:port]`` means http, port 11434."""
    value = value.strip().rstrip("/")
    if "://" in value:
        return value
    parts = urlsplit("http://" + value)
    netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:11434"
    return f"http://{netloc}{parts.path}".rstrip("/")


def normalize_vllm_host(value: str) -> str:
    """``VLLM_HOST`` may be a bare host; the OpenAI-compatible API lives under ``/v1``."""
    value = value.strip().rstrip("/")
    if "://" not in value:
        value = "http://" + value
    if not urlsplit(value).path:
        value += "/v1"
    return value


def _url_problem(value: str) -> str | None:
    """Why ``value`` cannot be an engine's or a search provider's URL, or ``None``.

    Checked when the configuration is loaded, so that a typo is a usage error naming
    where the URL came from, not an exception deep inside the HTTP client (an invalid
    IPv6 literal, a port over 65535, bytes that are not UTF-8).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "it holds bytes that are not UTF-8"
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in value):
        return "it holds spaces or control characters"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  # raises ValueError for a port that is not 0-65535
    except ValueError as exc:
        if str(exc).startswith("Port could not be cast"):  # it quotes the "port": a password
            # cut by an unescaped "/" (http://user:pa/ss@host) is read as host and port
            return "its port is not a number (write a / ? # or @ in a password %2F %3F %23 %40)"
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "only http:// and https:// URLs are supported"
    if not parts.hostname:
        return "it names no host"
    return None


def check_url(value: str, where: str) -> str:
    """``value`` if it is a usable http(s) URL, else a ``ConfigurationError`` naming
    ``where`` it came from (an option, a variable or a config key)."""
    problem = _url_problem(value)
    if problem is None:
        return value
    text = mask_url(value.encode("utf-8", "backslashreplace").decode("utf-8"))
    raise ConfigurationError(
        f"{where}: {shown(repr(text))} is not a usable URL ({problem}).",
        hint="Give an http:// or https:// URL, e.g. http://localhost:8000/v1.",
    )


_FILE_URL_KEYS = (
    *(("engine", name, key) for name, key in ENGINE_URL_KEYS.items()),
    ("tools", "web_search", "provider_url"),
)


def _check_file_urls(raw: Mapping[str, object], file: Path, notes: tuple[ConfigNote, ...]) -> None:
    for keys in _FILE_URL_KEYS:
        node: object = raw
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, str) and node:
            check_url(node, f"Invalid config file {file}: {_file_key(keys, notes)}")


MAX_PROBLEMS = 10
"""The most problems one message lists (a file can hold thousands of bad keys)."""


def _listed(problems: list[str]) -> str:
    """``problems`` joined for one message, the first :data:`MAX_PROBLEMS` of them."""
    listed = "; ".join(problems[:MAX_PROBLEMS])
    if len(problems) > MAX_PROBLEMS:
        listed += f"; and {len(problems) - MAX_PROBLEMS} more"
    return listed


def _file_key(path: Sequence[str | int], notes: tuple[ConfigNote, ...]) -> str:
    """The jarvis key at ``path`` as the file wrote it: ``agent.tools (read as
    tools.enabled)`` when it came from an OpenJarvis key; long keys cut."""
    dotted = ".".join(str(part) for part in path)
    for note in notes:
        target = note.detail
        if note.kind == "read_as" and (dotted == target or dotted.startswith(target + ".")):
            return f"{shown(note.key)} (read as {shown(dotted)})"
    return shown(dotted)


def _normalized(normalize: Callable[[str], str], value: str, where: str) -> str:
    """``normalize(value)``; a value that cannot even be parsed (an invalid port or IPv6
    literal) is a ``ConfigurationError`` naming ``where`` it came from."""
    try:
        return normalize(value)
    except ValueError as exc:
        raise ConfigurationError(
            f"{where}: {shown(repr(redact_urls(value)))} is not a usable address ({exc}).",
            hint="Give host[:port] or an http:// URL, e.g. localhost:11434.",
        ) from None


def _apply_environment(raw: dict[str, object], env: Mapping[str, str]) -> None:
    if host := env.get("OLLAMA_HOST", "").strip():
        url = check_url(_normalized(normalize_ollama_host, host, "OLLAMA_HOST"), "OLLAMA_HOST")
        _section(raw, "engine", "ollama")["host"] = url
    if host := env.get("VLLM_HOST", "").strip():
        url = check_url(_normalized(normalize_vllm_host, host, "VLLM_HOST"), "VLLM_HOST")
        _section(raw, "engine", "vllm")["base_url"] = url
    if url := env.get("OPENAI_BASE_URL", "").strip():
        _section(raw, "engine", "openai")["base_url"] = check_url(
            url.rstrip("/"), "OPENAI_BASE_URL"
        )
    if key := env.get("OPENAI_API_KEY", "").strip():
        _section(raw, "engine", "openai")["api_key"] = key
    if url := env.get("JARVIS_SEARCH_URL", "").strip():
        _section(raw, "tools", "web_search")["provider_url"] = check_url(url, "JARVIS_SEARCH_URL")


def _apply_overrides(raw: dict[str, object], overrides: EngineOverrides) -> None:
    engine = _section(raw, "engine")
    if overrides.engine is not None:
        if overrides.engine not in ENGINE_NAMES:
            raise ConfigurationError(
                f"Unknown engine '{shown(overrides.engine)}'.",
                hint="Known engines: " + ", ".join(ENGINE_NAMES),
            )
        engine["name"] = overrides.engine
    if overrides.model:
        engine["model"] = overrides.model
    if overrides.base_url:
        name = engine.get("name", "auto")
        if name == "auto":
            # a URL without an engine means "the OpenAI-compatible server at this URL"
            name = engine["name"] = "openai"
        if name == "llamacpp":
            raise ConfigurationError(
                "--base-url does not apply to the embedded llamacpp engine.",
                hint="Drop --base-url, or choose --engine openai|vllm|ollama.",
            )
        key = ENGINE_URL_KEYS.get(str(name))
        if key is not None:
            url = check_url(overrides.base_url.rstrip("/"), "--base-url")
            _section(raw, "engine", str(name))[key] = url


_MESSAGES = {
    "unexpected_keyword_argument": "Extra inputs are not permitted",
    "tuple_type": "Input should be a TOML array ([...])",
    "list_type": "Input should be a TOML array ([...])",
    "dataclass_type": "Input should be a table",
    "dict_type": "Input should be a table",
    "bool_type": "Input should be true or false",
    "bool_parsing": "Input should be true or false",
}
"""pydantic's wording said in TOML's: an unknown key of a dataclass section as for a
model, a tuple or a dataclass as the array or table a file writes."""


def _validate(raw: dict[str, object], file: Path, notes: tuple[ConfigNote, ...]) -> JarvisConfig:
    """The file's values as a :class:`JarvisConfig`; a number or a flag of another TOML
    type (``temperature = true``, ``port = "8000"``) is refused, not converted."""
    from pydantic import ValidationError

    from jarvis.application.config import JarvisConfig, validate
    from jarvis.application.config_bounds import bounds_at
    from jarvis.application.config_scalars import loose_scalars

    found = loose_scalars(JarvisConfig, raw)
    try:
        config = validate(JarvisConfig, raw)
    except ValidationError as exc:
        seen = {at for at, _ in found}
        for error in exc.errors():
            if tuple(error["loc"]) not in seen:
                found.append((tuple(error["loc"]), _MESSAGES.get(error["type"], error["msg"])))
    else:
        if not found:
            return config
    problems = []
    for at, text in found:
        problem = f"{_file_key(at, notes) or '(top level)'}: {text}"
        if (bounds := bounds_at(JarvisConfig, at)) is not None:
            problem += f" (accepted: {bounds.describe()})"
        problems.append(problem)
    raise ConfigurationError(
        f"Invalid config file {file}: " + _listed(problems),
        hint="Fix or remove the key named; see the configuration example in the README.",
    )
