"""Reading tool arguments that passed schema validation into Python values.

JSON has one number type, so an ``integer`` argument may arrive as ``3`` or ``3.0`` (both
satisfy the schema); tools read both the same way.
"""

from __future__ import annotations

from jarvis.domain.json_types import JSONObject


def integer_argument(
    arguments: JSONObject, key: str, *, default: int, low: int, high: int | None = None
) -> int | None:
    """The integer at ``key`` (``default`` when absent), or None when it is not a whole
    number within ``low``..``high``."""
    value = arguments.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < low or (high is not None and value > high):
        return None
    return value
