"""Narrowing of decoded JSON, so wire data becomes typed values without ``Any``.

``json.loads`` returns ``Any``; everything an adapter reads from an engine passes through
these helpers, which check the shape and return ``None`` when it is not what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import cast

from jarvis.domain.json_types import JSONObject, JSONValue


def loads(text: str | bytes) -> object:
    """Decode JSON text; raises ``ValueError`` when it is not JSON."""
    value: object = json.loads(text)
    return value


def as_object(value: object) -> dict[str, object] | None:
    """``value`` as a JSON object, or ``None``.

    Only for decoded JSON (``json.loads``, or llama-cpp-python's JSON-shaped answers), whose
    object keys are strings by construction: the keys are not checked one by one.
    """
    if isinstance(value, dict):
        return cast("dict[str, object]", value)
    return None


def as_list(value: object) -> list[object] | None:
    return cast("list[object]", value) if isinstance(value, list) else None


def as_json_object(value: object) -> JSONObject | None:
    """A decoded JSON object typed as :data:`JSONObject` (decoded JSON is always valid)."""
    obj = as_object(value)
    return cast("JSONObject", obj) if obj is not None else None


def get_object(data: Mapping[str, object], key: str) -> dict[str, object] | None:
    return as_object(data.get(key))


def get_list(data: Mapping[str, object], key: str) -> list[object]:
    return as_list(data.get(key)) or []


def get_str(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def get_int(data: Mapping[str, object], key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def dumps(value: JSONValue) -> str:
    """Compact JSON text, UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def names_in(data: object, list_key: str, *name_keys: str) -> list[str] | None:
    """The names listed under ``list_key`` (each entry's first non-empty ``name_keys``).

    ``None`` when ``data`` is not a JSON object; entries that are not objects or carry no
    name are skipped. Both model-list shapes (OpenAI's ``data[].id``, Ollama's
    ``models[].name``) are read through this.
    """
    body = as_object(data)
    if body is None:
        return None
    names: list[str] = []
    for raw in get_list(body, list_key):
        entry = as_object(raw)
        if entry is None:
            continue
        name = next((n for n in (get_str(entry, k) for k in name_keys) if n), None)
        if name:
            names.append(name)
    return names
