"""A number of the config file is a TOML number, a flag a TOML boolean: nothing is converted.

pydantic validates the file in its lax mode, which converts: ``temperature = true`` would
be ``1.0``, ``port = "8000"`` the integer 8000, ``enabled = 1`` or ``"yes"`` true. A boolean
taken for a number hides a mistake; a quoted number is not one in OpenJarvis either (its
loader assigns each TOML value as it is, so ``port = "8000"`` reaches uvicorn as a string,
and none of its shipped configs quotes a number). So before pydantic sees the file, every
value of a field typed ``int``, ``float`` or ``bool`` (nested sections, ``[mcp.servers.*]``
tables and arrays included) must be of TOML's own type: an integer for ``int``, an integer
or a float for ``float``, ``true``/``false`` for ``bool``. Values the command line and the
environment give are strings parsed by their own code (``-O``, ``--temperature``), never
here. Plain data in, problems out; no pydantic import.
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Mapping
from dataclasses import is_dataclass
from typing import Annotated, Union, get_args, get_origin, get_type_hints

from jarvis.domain.errors import shown

KeyPath = tuple[str | int, ...]
"""Where a value is: keys, and indexes in an array."""

_EXPECTED = {int: "an integer", float: "a number", bool: "true or false"}


def loose_scalars(
    cls: type, data: Mapping[str, object], at: KeyPath = ()
) -> list[tuple[KeyPath, str]]:
    """Each value of ``data`` (a section of type ``cls``) that is not of its field's TOML
    type, with where it is and what is wrong; keys ``cls`` does not have are left for the
    validation that refuses them."""
    hints = get_type_hints(cls, include_extras=True)
    problems: list[tuple[KeyPath, str]] = []
    for key, value in data.items():
        if key in hints:
            problems += _check(hints[key], value, (*at, key))
    return problems


def _plain(hint: object) -> object:
    """``hint`` without its ``Annotated`` metadata."""
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _check(hint: object, value: object, at: KeyPath) -> list[tuple[KeyPath, str]]:
    plain = _plain(hint)
    origin = get_origin(plain)
    if origin is None and isinstance(plain, type) and is_dataclass(plain):
        return loose_scalars(plain, value, at) if isinstance(value, Mapping) else []
    if origin is dict and isinstance(value, Mapping):
        item = get_args(plain)[1]
        return [found for key, v in value.items() for found in _check(item, v, (*at, str(key)))]
    if origin in (tuple, list) and isinstance(value, list):
        item = get_args(plain)[0]
        return [found for index, v in enumerate(value) for found in _check(item, v, (*at, index))]
    kinds = _scalar_kinds(plain)
    if kinds is None or not isinstance(value, bool | int | float | str) or _fits(kinds, value):
        return []  # an array or a table where a scalar belongs: the validation says so
    return [(at, _problem(kinds, value))]


def _scalar_kinds(hint: object) -> frozenset[type] | None:
    """The TOML scalar types a field typed ``hint`` takes (``int``, ``float``, ``bool``);
    ``None`` when it takes a string or anything else as well (nothing to check here)."""
    union = get_origin(hint) in (Union, types.UnionType)
    kinds: set[type] = set()
    for member in get_args(hint) if union else (hint,):
        plain = _plain(member)
        if plain is type(None):
            continue
        if not isinstance(plain, type) or plain not in _EXPECTED:
            return None
        kinds.add(plain)
    return frozenset(kinds) or None


def _fits(kinds: frozenset[type], value: object) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int):
        return int in kinds or float in kinds
    return isinstance(value, float) and float in kinds


def _problem(kinds: frozenset[type], value: bool | int | float | str) -> str:
    """``"8000" (a string) is not an integer; write it without quotes``."""
    expected = " or ".join(_EXPECTED[kind] for kind in (int, float, bool) if kind in kinds)
    if float in kinds and int in kinds:
        expected = expected.replace("an integer or a number", "a number")
    if isinstance(value, bool):
        shown_value, what = ("true" if value else "false"), "a boolean"
    elif isinstance(value, str):
        shown_value, what = shown(json.dumps(value, ensure_ascii=False)), "a string"
    else:
        shown_value, what = repr(value), "an integer" if isinstance(value, int) else "a float"
    problem = f"{shown_value} ({what}) is not {expected}"
    if isinstance(value, str) and _fits(kinds, _number(value)):
        problem += "; write it without quotes"
    return problem


def _number(text: str) -> object:
    """``text`` as the finite TOML number or the boolean it spells, else ``text``."""
    word = text.strip()
    if word in ("true", "false"):
        return word == "true"
    for parse in (int, float):
        try:
            number = parse(word)
        except ValueError:
            continue
        return number if math.isfinite(number) else text
    return text
