"""``memory_store``: the one way an operative's model writes what it keeps between ticks.

Each tick of an operator gets its own instance, bound to that operator: key ``state`` (the
default, or the full ``operator:<id>:state``) replaces the state the next tick is shown,
and the tick then keeps it as stored instead of saving its answer as the state; any other
key stores a named note under ``operator:<id>:memory:<key>``, shown at later ticks too. The
model can never write outside its operator's keys.
"""

from __future__ import annotations

import re
from typing import Final

from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.json_types import JSONObject
from jarvis.domain.operators import encode_state, key_prefix, state_key
from jarvis.domain.ports import OperatorStorePort
from jarvis.domain.tools.specs import ToolResult, ToolSpec

MAX_VALUE_CHARS: Final = 64 * 1024
"""The largest value one call stores (as JSON text)."""

MAX_NOTES: Final = 32
"""How many named notes one operator keeps; storing a new one beyond is refused."""

_NOTE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

MEMORY_STORE_SPEC: Final = ToolSpec(
    name="memory_store",
    description=(
        "Store something in this operator's persistent memory, for later ticks. "
        "key 'state' (the default) replaces your state: what the next tick is shown as its "
        "previous state. Any other key (letters, digits, _ . -) stores a named note."
    ),
    parameters={
        "type": "object",
        "properties": {
            "key": {
                "type": "string",
                "description": "'state' (default) or the name of a note.",
                "maxLength": 200,
            },
            "value": {"description": "What to remember: text, or any JSON value."},
        },
        "required": ["value"],
        "additionalProperties": False,
    },
    category="memory",
    timeout_seconds=30.0,
    side_effects=True,
)


def note_prefix(operator_id: str) -> str:
    """Where an operator's named notes live."""
    return key_prefix(operator_id) + "memory:"


class MemoryStoreTool:
    """``memory_store`` for one tick of operator ``operator_id``; :attr:`state_stored` says
    whether the tick's model stored its state itself."""

    def __init__(self, store: OperatorStorePort, operator_id: str) -> None:
        self.store = store
        self.operator_id = operator_id
        self.state_stored = False

    @property
    def spec(self) -> ToolSpec:
        return MEMORY_STORE_SPEC

    def _fail(self, message: str) -> ToolResult:
        return ToolResult(tool_name="memory_store", content=message, success=False)

    async def execute(self, arguments: JSONObject) -> ToolResult:
        key = arguments.get("key", "state")
        value = arguments.get("value")
        if not isinstance(key, str):
            return self._fail("key must be a string.")
        try:
            text = encode_state(value)
        except ConfigurationError as exc:
            return self._fail(exc.message)
        if len(text) > MAX_VALUE_CHARS:
            return self._fail(f"The value is {len(text)} characters; at most {MAX_VALUE_CHARS}.")
        full_state = state_key(self.operator_id)
        if key in ("state", full_state):
            await self.store.put_state(full_state, value)
            self.state_stored = True
            return ToolResult(tool_name="memory_store", content="Stored the state.")
        if not _NOTE_KEY.fullmatch(key):
            return self._fail(
                f"Invalid key {shown(key)!r}: use 'state' or a name of letters, digits, _ . - "
                "(at most 64 characters)."
            )
        prefix = note_prefix(self.operator_id)
        existing = await self.store.state_keys(prefix)
        if prefix + key not in existing and len(existing) >= MAX_NOTES:
            return self._fail(
                f"This operator already keeps {MAX_NOTES} notes; store into an existing "
                "key instead: " + ", ".join(k.removeprefix(prefix) for k in existing)
            )
        await self.store.put_state(prefix + key, value)
        return ToolResult(tool_name="memory_store", content=f"Stored note {key!r}.")
