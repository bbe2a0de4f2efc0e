"""The SDK's typed answers: what ``output_type`` takes, and the specs made from it.

Making an :class:`~jarvis.domain.typed_output.OutputSpec` from a type builds a pydantic
``TypeAdapter`` and its JSON schema, which costs more than a question should pay twice:
the specs of types are kept (a bounded number), those of schema dicts are cheap to remake.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from jarvis.domain.typed_output import OutputSpec

MAX_KEPT_OUTPUT_TYPES = 64

OutputType: TypeAlias = "type[object] | Mapping[str, object]"
"""What ``output_type`` takes: a pydantic model, a dataclass, a TypedDict (any type
pydantic's ``TypeAdapter`` describes) or a JSON Schema dict."""


class OutputSpecs:
    """The output specs of one SDK instance, made once per (type, retries)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[type[object], int], OutputSpec[object]] = {}

    def spec(self, output_type: OutputType, retries: int) -> OutputSpec[object]:
        """The spec of ``output_type`` checked with ``retries`` retries."""
        from jarvis.application.output_types import output_spec

        if not isinstance(output_type, type):  # a schema dict: cheap to check each time
            return output_spec(output_type, retries=retries)
        key = (output_type, retries)
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None:
            return kept
        made: OutputSpec[object] = output_spec(output_type, retries=retries)
        with self._lock:
            if len(self._kept) >= MAX_KEPT_OUTPUT_TYPES:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = made
        return made
