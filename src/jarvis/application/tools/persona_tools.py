"""``memory_manage`` and ``user_profile_manage``: the model keeps MEMORY.md and USER.md.

Both edit the *default* files (never a named persona's copy) through the persona store,
whose edits are locked and atomic. The file is a Markdown list: one entry per ``- `` line.
An empty or unmatched ``remove`` changes nothing (it never deletes every line), an
ambiguous ``update`` changes nothing and lists the candidates, a duplicate
``add`` is reported, and a file cannot grow past twice its prompt budget.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Final, Literal

from jarvis.domain.errors import PersonaError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.persona import FILE_NAMES
from jarvis.domain.ports import PersonaFile, PersonaStorePort
from jarvis.domain.tools.specs import ToolResult, ToolSpec

FILE_GROWTH_FACTOR: Final = 2
"""A file may hold this many times its prompt budget before adds are refused."""
MAX_ENTRY_CHARS: Final = 500
Action = Literal["read", "add", "update", "remove"]
ACTIONS: Final[dict[str, Action]] = {a: a for a in ("read", "add", "update", "remove")}

_LIST_LINE = re.compile(r"^(\s*[-*+]\s+)(.*)$")
_BULLET = re.compile(r"^[-*+](?:\s+|$)")


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryOutcome:
    """What an action did: the resulting text, and what to tell the model."""

    text: str
    message: str
    success: bool = True
    changed: bool = False


def normalize_entry(raw: str) -> str:
    """One line: whitespace (newlines included) collapsed, a leading list bullet dropped."""
    return _BULLET.sub("", " ".join(raw.split()))


def _entries(lines: list[str]) -> list[tuple[int, str]]:
    found = []
    for index, line in enumerate(lines):
        match = _LIST_LINE.match(line)
        if match:
            found.append((index, normalize_entry(match.group(2))))
    return found


def _matches(lines: list[str], entry: str) -> list[int]:
    """Lines whose entry equals ``entry``; else lines containing it (any case)."""
    entries = _entries(lines)
    exact = [index for index, body in entries if body == entry]
    if exact:
        return exact
    needle = entry.casefold()
    return [index for index, body in entries if needle in body.casefold()]


def _ambiguous(label: str, entry: str, lines: list[str], found: list[int]) -> str:
    listed = "\n".join(lines[index].strip() for index in found[:10])
    return (
        f"'{entry}' matches {len(found)} entries in {label}; nothing changed. "
        f"Give the whole entry to pick one:\n{listed}"
    )


def apply_entry_action(
    text: str,
    action: Action,
    entry: str = "",
    new_entry: str = "",
    *,
    label: str,
    max_chars: int,
) -> EntryOutcome:
    """Apply one action to the text of a persona file (pure: nothing is written here)."""
    entry, new_entry = normalize_entry(entry), normalize_entry(new_entry)
    if action == "read":
        return EntryOutcome(text=text, message=text.strip() or f"{label} is empty.")
    refused = _refusal(action, entry, new_entry)
    if refused is not None:
        return EntryOutcome(text=text, message=refused, success=False)
    if action == "add":
        edit = _added(text, entry, label)
    else:
        edit = _edited(text, action, entry, new_entry, label)
    if isinstance(edit, EntryOutcome):
        return edit
    new_text, message = edit
    if len(new_text) > max_chars and len(new_text) > len(text):
        return EntryOutcome(
            text=text,
            message=f"Nothing changed: {label} would grow to {len(new_text):,} characters, over "
            f"its limit of {max_chars:,}. Remove or shorten entries first.",
            success=False,
        )
    return EntryOutcome(text=new_text, message=message, changed=new_text != text)


def _refusal(action: Action, entry: str, new_entry: str) -> str | None:
    """Why the action cannot be applied whatever the file holds (``None``: it can)."""
    if not entry:
        return f"Nothing changed: 'entry' is empty. Give the text of the entry to {action}."
    if len(entry) > MAX_ENTRY_CHARS or len(new_entry) > MAX_ENTRY_CHARS:
        return (
            f"Nothing changed: an entry may have at most {MAX_ENTRY_CHARS} characters. "
            "Keep entries to one short fact each."
        )
    if action == "update" and not new_entry:
        return "Nothing changed: 'new_entry' is empty. Use action 'remove' to delete an entry."
    return None


def _added(text: str, entry: str, label: str) -> EntryOutcome | tuple[str, str]:
    """The text with ``entry`` appended and what to say, or the outcome when it is there."""
    if any(body == entry for _, body in _entries(text.splitlines())):
        return EntryOutcome(text=text, message=f"Already in {label}: - {entry} (no change).")
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return f"{prefix}- {entry}\n", f"Added to {label}: - {entry}"


def _edited(
    text: str, action: Action, entry: str, new_entry: str, label: str
) -> EntryOutcome | tuple[str, str]:
    """The text with ``entry`` updated or removed and what to say, or the refusal when no
    entry or several different ones match."""
    lines = text.splitlines()
    found = _matches(lines, entry)
    if not found:
        return EntryOutcome(
            text=text,
            message=f"No entry in {label} matches '{entry}'; nothing changed. "
            "Use action 'read' to see the entries.",
            success=False,
        )
    if len({normalize_entry(lines[i]) for i in found}) > 1:
        return EntryOutcome(
            text=text, message=_ambiguous(label, entry, lines, found), success=False
        )
    old = lines[found[0]].strip()
    if action == "update":
        bullet = _LIST_LINE.match(lines[found[0]])
        lead = bullet.group(1) if bullet else "- "
        for index in found:
            lines[index] = f"{lead}{new_entry}"
        message = f"Updated in {label}: {old} -> - {new_entry}"
    else:
        lines = [line for index, line in enumerate(lines) if index not in found]
        message = f"Removed from {label}: {old}"
    return ("\n".join(lines) + "\n" if lines else ""), message


def _spec(name: str, description: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": list(ACTIONS),
                    "description": "read the file, add an entry, update one, or remove one.",
                },
                "entry": {
                    "type": "string",
                    "description": "add: the new entry (one line). update/remove: the entry "
                    "to change, or a unique part of it.",
                },
                "new_entry": {
                    "type": "string",
                    "description": "update only: the text that replaces the entry.",
                },
            },
            "required": ["action"],
            "additionalProperties": False,
        },
        category="memory",
        timeout_seconds=30.0,
        side_effects=True,
    )


MEMORY_MANAGE_SPEC: Final = _spec(
    "memory_manage",
    "Keep lasting facts about the user and their projects in MEMORY.md, which you see as "
    "'Agent Memory' at the start of every conversation. One short fact per entry.",
)
USER_PROFILE_MANAGE_SPEC: Final = _spec(
    "user_profile_manage",
    "Keep who the user is (name, role, preferences, how they like answers) in USER.md, "
    "which you see as 'User Profile' at the start of every conversation. One fact per entry.",
)


class PersonaFileTool:
    """A tool over one default persona file. ``max_chars`` bounds the file's size."""

    def __init__(
        self, store: PersonaStorePort, *, kind: PersonaFile, spec: ToolSpec, max_chars: int
    ) -> None:
        self.store = store
        self.kind = kind
        self._spec = spec
        self.max_chars = max_chars
        self.label = FILE_NAMES[kind]

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def _result(self, content: str, *, success: bool, changed: bool = False) -> ToolResult:
        return ToolResult(
            tool_name=self._spec.name,
            content=content,
            success=success,
            metadata={"file": self.label, "changed": changed},
        )

    async def execute(self, arguments: JSONObject) -> ToolResult:
        requested = arguments.get("action")
        action = ACTIONS.get(requested) if isinstance(requested, str) else None
        entry = arguments.get("entry", "")
        new_entry = arguments.get("new_entry", "")
        if action is None:
            return self._result(
                f"Error: 'action' must be one of {', '.join(ACTIONS)}.", success=False
            )
        if not isinstance(entry, str) or not isinstance(new_entry, str):
            return self._result("Error: 'entry' and 'new_entry' must be strings.", success=False)
        try:
            if action == "read":
                return self._result(await asyncio.to_thread(self._read), success=True)
            outcome = await asyncio.to_thread(self._edit, action, entry, new_entry)
        except PersonaError as error:
            return self._result(f"Error: {error}", success=False)
        return self._result(outcome.message, success=outcome.success, changed=outcome.changed)

    def _read(self) -> str:
        for document in self.store.load(None):
            if document.kind is self.kind and document.text.strip():
                return document.text.strip()
        return f"{self.label} is empty."

    def _edit(self, action: Action, entry: str, new_entry: str) -> EntryOutcome:
        outcomes: list[EntryOutcome] = []

        def change(text: str) -> str:
            outcome = apply_entry_action(
                text, action, entry, new_entry, label=self.label, max_chars=self.max_chars
            )
            outcomes.append(outcome)
            return outcome.text

        self.store.edit(self.kind, change)
        return outcomes[-1]


class MemoryManageTool(PersonaFileTool):
    """``memory_manage``: entries of the default MEMORY.md."""

    def __init__(self, store: PersonaStorePort, *, max_chars: int) -> None:
        super().__init__(
            store, kind=PersonaFile.MEMORY, spec=MEMORY_MANAGE_SPEC, max_chars=max_chars
        )


class UserProfileManageTool(PersonaFileTool):
    """``user_profile_manage``: entries of the default USER.md."""

    def __init__(self, store: PersonaStorePort, *, max_chars: int) -> None:
        super().__init__(
            store, kind=PersonaFile.USER, spec=USER_PROFILE_MANAGE_SPEC, max_chars=max_chars
        )


def persona_tools(
    store: PersonaStorePort, *, memory_max_chars: int, user_max_chars: int
) -> list[PersonaFileTool]:
    """Both tools, each file bounded to :data:`FILE_GROWTH_FACTOR` times its prompt budget."""
    return [
        MemoryManageTool(store, max_chars=memory_max_chars * FILE_GROWTH_FACTOR),
        UserProfileManageTool(store, max_chars=user_max_chars * FILE_GROWTH_FACTOR),
    ]
