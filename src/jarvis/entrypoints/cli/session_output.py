"""How ``jarvis sessions`` writes a stored session out: the listing's times, a transcript
(``show``), JSON lines (``export``), one JSON document (``--json``).

Loaded when one of those commands runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.sessions` among them), not this one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from jarvis.domain.sessions.records import (
    encode_record,
    message_to_record,
    stored_time,
    to_micros,
)
from jarvis.entrypoints.cli.streams import json_text
from jarvis.entrypoints.terminal_text import is_terminal, terminal_safe

if TYPE_CHECKING:
    from jarvis.application.conversation import Sessions
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.sessions.records import SessionMessage


def listed_time(micros: int) -> str:
    """A session's time as ``jarvis sessions list`` shows it (local, to the minute)."""
    return stored_time(micros, local=True).strftime("%Y-%m-%d %H:%M")


def record_json(record: SessionMessage) -> JSONObject:
    """The canonical record of ``record``, with its time also as ISO 8601 (``time``)."""
    data = message_to_record(record)
    data["time"] = stored_time(to_micros(record.created_at)).isoformat()
    return data


def transcript_line(record: SessionMessage) -> str:
    """One message of ``jarvis sessions show``: its local time, role, model and usage, tool
    calls with their ids."""
    message = record.message
    moment = stored_time(to_micros(record.created_at), local=True)
    when = moment.strftime("%Y-%m-%d %H:%M:%S")
    role = message.role.value
    if message.tool_calls:
        calls = ", ".join(
            f"{call.name}({call.arguments_json()}) [{call.id}]" for call in message.tool_calls
        )
        text = f"{message.content}\n  → {calls}" if message.content else f"→ {calls}"
        return f"[{when}] {role}: {text}"
    if message.tool_call_id is not None:
        return f"[{when}] tool {message.name or ''} [{message.tool_call_id}]: {message.content}"
    extra = ""
    if record.model:
        usage = record.usage
        tokens = f", {usage.prompt_tokens}+{usage.completion_tokens} tokens" if usage else ""
        extra = f" ({record.model}{tokens})"
    return f"[{when}] {role}{extra}: {message.content}"


def _collect_from_now() -> None:
    """End the collector's start-up pause (``jarvis.entrypoints.cli.main``) now: a long
    session's pages make cyclic garbage from the first one, and left for the pause's 0.5 s
    a 100,000-message ``show --json`` peaked 50 MB higher, by how fast the machine was."""
    import gc

    if not gc.isenabled():
        gc.freeze()
        gc.enable()


async def write_session(store: Sessions, name: str, *, json_output: bool, transcript: bool) -> None:
    """Write session ``name`` as it is read from the store, a page at a time: a transcript
    (``show``), JSON lines (``export``), or one JSON document (``--json``, written piece by
    piece; ``show`` ends it with the message count)."""
    _collect_from_now()
    await store.require(name)
    terminal, write = is_terminal(sys.stdout), sys.stdout.write

    def emit(text: str) -> None:  # write_raw, with the terminal asked once
        write(terminal_safe(text) if terminal else text)

    count = 0
    records = store.iter_records(name)
    if not json_output:
        async for record in records:
            emit((transcript_line(record) if transcript else encode_record(record)) + "\n")
        return
    emit('{\n  "id": ' + json_text(name, stream=sys.stdout) + ',\n  "messages": [')
    async for record in records:
        item = json_text(record_json(record), stream=sys.stdout).replace("\n", "\n    ")
        emit(("," if count else "") + "\n    " + item)
        count += 1
    ending = "\n  ]" if count else "]"
    if transcript:
        ending += f',\n  "message_count": {count}'
    emit(ending + "\n}\n")
