"""Nested TOML tables addressed by dotted keys (``engine.ollama.host``): read, remove and
set a key, list every leaf. Plain data in, plain data out (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

Table = dict[str, object]
"""A parsed TOML table."""


def split_key(dotted: str) -> list[str]:
    return dotted.split(".")


def get_key(raw: Mapping[str, object], dotted: str) -> tuple[bool, object]:
    return get_path(raw, split_key(dotted))


def get_path(raw: Mapping[str, object], path: list[str]) -> tuple[bool, object]:
    """Like :func:`get_key` for the keys of each level (a file's quoted key may hold a dot:
    ``[memory] "a.b" = 1`` is one key, ``a.b``)."""
    node: object = raw
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = cast("Mapping[str, object]", node)[part]
    return True, node


def pop_key(raw: Table, dotted: str) -> object:
    return pop_path(raw, split_key(dotted))


def pop_path(raw: Table, path: list[str]) -> object:
    """Like :func:`pop_key` for the keys of each level (see :func:`get_path`)."""
    *parents, last = path
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
        found, node = get_path(raw, parents[:depth])
        if found and isinstance(node, dict) and not node:
            _pop_plain(raw, parents[:depth])
        else:
            return


def _pop_plain(raw: Table, path: list[str]) -> None:
    node: object = raw
    for part in path[:-1]:
        node = cast("Table", node)[part]
    cast("Table", node).pop(path[-1], None)


def set_key(raw: Table, dotted: str, value: object) -> bool:
    """Set ``dotted`` unless a table on the way is not a table (left to validation)."""
    *parents, last = split_key(dotted)
    node = raw
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return False
        node = cast("Table", child)
    node[last] = value
    return True


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


MAX_SHOWN_PATH = 512
"""A path in a message is shown whole up to this (a user needs it to act), cut past it."""
