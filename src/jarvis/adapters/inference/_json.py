"""Decoding and narrowing of engine JSON, so wire data becomes typed values without ``Any``.

``json.loads`` returns ``Any``; everything an adapter reads from an engine passes through
these helpers, which check the shape and return ``None`` when it is not what was expected.

:func:`loads` also makes what an engine sends safe to hand on: bytes that are not UTF-8
are decoded with U+FFFD in their place, and so are lone surrogates written as ``\\ud800``
escapes (Python would keep them, and printing them fails), so a stray byte never costs the
answer; nesting deeper than ``MAX_DEPTH`` is refused as not JSON, so that no code walking
the value later meets a ``RecursionError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import cast

import orjson

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.well_formed import well_formed_json

MAX_DEPTH = 128
"""The deepest nesting of arrays and objects accepted from an engine."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes) -> object:
    """Decode JSON text; raises ``ValueError`` when it is not JSON or nested too deeply."""
    decoded = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    try:
        value: object = json.loads(decoded)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    # both checks are one C-speed scan; the walks below run only for unusual text
    if decoded.count("[") + decoded.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    if "\\u" in decoded and _SURROGATE_ESCAPE.search(decoded) is not None:
        value = well_formed_json(cast(JSONValue, value))  # decoded JSON: pairs are joined
    return value


def _children(value: object) -> list[object]:
    if isinstance(value, dict):
        return list(cast("dict[str, object]", value).values())
    if isinstance(value, list):
        return cast("list[object]", value)
    return []


def _depth(value: object) -> int:
    """The nesting depth of decoded JSON (iterative: ``json.loads`` took it, so can we)."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = _children(item)
        if children or isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            pending.extend((child, level + 1) for child in children)
    return deepest


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


def encode(value: JSONValue) -> bytes:
    """Compact JSON as UTF-8 bytes: a request's body.

    orjson writes it in a small fraction of the standard library's time (the body of a tool
    turn repeats the whole conversation, so this is paid on every turn). What orjson
    refuses is written by the standard library, the same text otherwise: a string carrying
    a lone surrogate (a model may send one back in a later turn; it is sent as ``?`` rather
    than making the strict UTF-8 encoder refuse the whole request) or an integer past 64
    bits. A float that is not finite (``NaN`` in a model's tool arguments, which Python's
    JSON reader accepts) is written as ``null`` either way: bare ``NaN`` is not JSON.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return dumps(_finite_only(value)).encode("utf-8", "replace")


def _finite_only(value: JSONValue) -> JSONValue:
    """``value`` with ``None`` for every float that is not finite, as orjson writes it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_only(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_only(item) for item in value]
    return value


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
