"""Assembling streamed OpenAI tool-call fragments into complete :class:`ToolCall` values.

OpenAI-style servers send a tool call as fragments keyed by ``index``: the first carries
the id and the name, later ones pieces of the argument text. Some servers (llama.cpp)
repeat the id and name in every fragment, so a name is taken once and never concatenated.
The arguments are parsed only when the stream ends, through
:meth:`ToolCall.from_json_text`: malformed JSON is kept in ``raw_arguments``, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jarvis.adapters.inference._json import as_object, get_int, get_object, get_str
from jarvis.domain.llm.messages import ToolCall


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Collects ``delta.tool_calls`` fragments; :meth:`calls` returns the finished calls."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    @property
    def count(self) -> int:
        """How many calls have begun."""
        return len(self._calls)

    def add(self, fragments: list[object]) -> int:
        """Take the fragments of one chunk; returns how many characters of text they held
        (names and argument pieces), for the bounds of the reply."""
        chars = 0
        for position, raw in enumerate(fragments):
            fragment = as_object(raw)
            if fragment is None:
                continue
            index = get_int(fragment, "index")
            if index is None:
                index = position
            partial = self._calls.setdefault(index, _PartialCall())
            call_id = get_str(fragment, "id")
            if call_id and not partial.id:
                partial.id = call_id
            function = get_object(fragment, "function") or {}
            name = get_str(function, "name")
            if name and not partial.name:
                partial.name = name
                chars += len(name)
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                partial.arguments.append(arguments)
                chars += len(arguments)
        return chars

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall.from_json_text(
                id=partial.id or f"call_{index}",
                name=partial.name,
                text="".join(partial.arguments),
            )
            for index, partial in sorted(self._calls.items())
        )
