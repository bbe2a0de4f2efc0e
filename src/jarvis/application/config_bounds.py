"""Numeric bounds of configuration fields, and numbers as a person writes them.

:class:`Bounds` is declared on a field (``Annotated[int, Bounds(gt=0)]``) and enforced by
pydantic when a file is validated; :func:`bounds_at` finds it again so that an error can say
which values are accepted. No pydantic import here: the defaults never need it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, is_dataclass
from typing import get_args, get_type_hints


def plain_number(value: float) -> str:
    """``value`` as a person writes it: ``1048576``, not ``1.04858e+06``; ``0.05``."""
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e18):
        return str(int(value))
    return f"{value:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """Numeric bounds of a field, enforced by pydantic when a file is validated.

    TOML has ``inf`` and ``nan``: a float field with bounds also refuses them (NaN compares
    false with every bound, and an infinite timeout or budget is no bound at all).
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def __get_pydantic_core_schema__(
        self, source: object, handler: Callable[[object], dict[str, object]]
    ) -> dict[str, object]:
        schema = dict(handler(source))
        if schema.get("type") == "float":
            schema["allow_inf_nan"] = False
        for key in ("gt", "ge", "lt", "le"):
            value = getattr(self, key)
            if value is not None:
                schema[key] = value
        return schema

    def describe(self) -> str:
        """The accepted range in words: ``greater than 0 and at most 86400``."""
        words = {"gt": "greater than", "ge": "at least", "lt": "less than", "le": "at most"}
        parts = [
            f"{words[key]} {plain_number(value)}"
            for key in ("gt", "ge", "lt", "le")
            if (value := getattr(self, key)) is not None
        ]
        return " and ".join(parts)


def bounds_at(cls: type, path: Sequence[str | int]) -> Bounds | None:
    """The :class:`Bounds` of the field at the dotted ``path`` below section ``cls``, if any
    (so that an error can say which values are accepted)."""
    node: object = cls
    for part in path:
        if not (isinstance(node, type) and is_dataclass(node)) or not isinstance(part, str):
            return None
        hints = get_type_hints(node, include_extras=True)
        if part not in hints:
            return None
        node = hints[part]
        for arg in (node, *get_args(node)):  # ``Annotated[...] | None`` or ``Annotated[...]``
            for meta in getattr(arg, "__metadata__", ()):
                if isinstance(meta, Bounds):
                    return meta
    return None
