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


def holds_lone_surrogate(value: JSONValue) -> bool:
    """Whether any string in ``value`` (keys included) holds a lone surrogate: a walk that
    makes nothing, so that an ordinary value costs one check per string (iterative: a
    value nested deeper than the interpreter's recursion limit is walked too)."""
    pending: list[JSONValue] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not is_well_formed(item):
                return True
        elif isinstance(item, dict):
            for key, child in item.items():
                if not is_well_formed(key):
                    return True
                pending.append(child)
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _rebuilt(value: JSONValue) -> JSONValue:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        return [_rebuilt(item) for item in value]
    if isinstance(value, dict):
        return {well_formed(key): _rebuilt(item) for key, item in value.items()}
    return value


def well_formed_json(value: JSONValue) -> JSONValue:
    """``value`` with :func:`well_formed` applied to every string in it, keys included;
    ``value`` itself when none needed it (nothing is copied for ordinary values)."""
    if isinstance(value, str):
        return well_formed(value)
    return _rebuilt(value) if holds_lone_surrogate(value) else value


def well_formed_object(value: JSONObject) -> JSONObject:
    """:func:`well_formed_json` for a JSON object (its type kept for the caller)."""
    if not value or not holds_lone_surrogate(value):
        return value
    return {well_formed(key): _rebuilt(item) for key, item in value.items()}
