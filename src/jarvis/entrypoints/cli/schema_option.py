"""``jarvis ask --schema``: the answer's shape as a file, as JSON, or in a few words.

Three spellings, told apart without guessing wrong: text starting with ``{`` is a JSON
Schema; otherwise a path to an existing file is a JSON Schema file; otherwise the text is
the short form ``name str, age int, tags: a description`` (fields separated by commas or
new lines; a type among ``str``, ``int``, ``float``, ``bool`` and their JSON Schema names,
default ``str``; after ``:`` a description; every field required, no other field allowed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.typed_output import MAX_SCHEMA_BYTES, OutputSpec, schema_spec

SHORT_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
}
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,63})(?:\s+([A-Za-z]+))?$")
_USAGE = (
    'Give a JSON Schema file, a JSON Schema (\'{"type": "object", ...}\') or fields '
    "such as 'name str, age int'."
)


def schema_option(value: str, *, retries: int) -> OutputSpec[JSONValue]:
    """The output spec ``--schema VALUE`` asks for; anything unusable is a usage error."""
    text = value.strip()
    if not text:
        raise ConfigurationError("--schema is empty.", hint=_USAGE)
    if text.startswith("{"):
        return schema_spec(_json(text, "--schema"), retries=retries)
    path = Path(value)
    if _is_file(path):
        return schema_spec(_json(_read(path), f"the schema file '{path}'"), retries=retries)
    return schema_spec(short_schema(text), retries=retries)


def _is_file(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def _read(path: Path) -> str:
    from jarvis.entrypoints.bounded_files import read_regular_file

    try:
        data = read_regular_file(path, limit=MAX_SCHEMA_BYTES, what="schema file")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"Cannot read the schema file '{path}': {reason}.") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"The schema file '{path}' is not UTF-8 text.") from exc


def _json(text: str, where: str) -> JSONValue:
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise ConfigurationError(f"{where} is larger than {MAX_SCHEMA_BYTES // 1024} KiB.")
    try:
        value: JSONValue = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(f"{where} is not valid JSON: {exc}.", hint=_USAGE) from None
    return value


def short_schema(text: str) -> JSONObject:
    """The JSON Schema of the short form ``name str, age int: their age in years``."""
    properties: JSONObject = {}
    for raw in re.split(r"[,\n]", text):
        field, _, description = raw.partition(":")
        field = field.strip()
        if not field and not description.strip():
            continue
        match = _FIELD.match(field)
        if match is None:
            raise ConfigurationError(
                f"--schema: cannot read the field {raw.strip()!r} (a name, then optionally "
                "a type and ': description').",
                hint=_USAGE,
            )
        name, kind = match.group(1), (match.group(2) or "str").lower()
        if kind not in SHORT_TYPES:
            raise ConfigurationError(
                f"--schema: unknown type {kind!r} for the field '{name}'.",
                hint="Types: str, int, float, bool.",
            )
        if name in properties:
            raise ConfigurationError(f"--schema: the field '{name}' is given twice.")
        prop: JSONObject = {"type": SHORT_TYPES[kind]}
        if description.strip():
            prop["description"] = description.strip()
        properties[name] = prop
    if not properties:
        raise ConfigurationError("--schema names no field.", hint=_USAGE)
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
