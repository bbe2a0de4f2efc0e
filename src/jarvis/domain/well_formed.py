"""Text that UTF-8 can hold: each lone surrogate replaced by U+FFFD.

A Python string can hold a lone surrogate (``"\\ud800"``: a JSON escape, a command line's
undecodable byte, a plug-in's or an application's engine that made one); UTF-8 has no
place for it, so every writer of UTF-8 (an HTTP body, a database, a protobuf string)
refuses the whole text. These helpers turn such text into text every writer takes and
lose nothing else. Ordinary text pays one C-speed check (``isascii``, else one UTF-8
encoding); only text that holds a surrogate is rewritten.
"""

from __future__ import annotations

import re
from typing import Final

from jarvis.domain.json_types import JSONObject, JSONValue

REPLACEMENT: Final = "\ufffd"
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""Any surrogate code point: in a Python string whose pairs are joined (decoded JSON, a
literal), every one left stands alone."""


def is_well_formed(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; ``text`` itself (the same
    object) when it holds none, so a caller can tell with ``is`` whether anything changed."""
    if is_well_formed(text):
        return text
    return LONE_SURROGATE.sub(REPLACEMENT, text)


def well_formed_json(value: JSONValue) -> JSONValue:
    """``value`` with :func:`well_formed` applied to every string in it, keys included;
    ``value`` itself when none changed (nothing is copied for ordinary values)."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        items = [well_formed_json(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        return well_formed_object(value)
    return value


def well_formed_object(value: JSONObject) -> JSONObject:
    """:func:`well_formed_json` for a JSON object (its type kept for the caller)."""
    if not value:
        return value
    cleaned = {well_formed(key): well_formed_json(item) for key, item in value.items()}
    same = len(cleaned) == len(value) and all(
        key in value and value[key] is item for key, item in cleaned.items()
    )
    return value if same else cleaned
