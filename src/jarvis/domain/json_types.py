"""JSON value types shared by every layer, so no ``Any`` has to cross a port."""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = bool | int | float | str | None
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = dict[str, JSONValue]
