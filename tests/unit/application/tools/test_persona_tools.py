"""memory_manage / user_profile_manage: one-line entries, no destructive surprises."""

from __future__ import annotations

import pytest

from jarvis.application.tools.persona_tools import (
    MEMORY_MANAGE_SPEC,
    USER_PROFILE_MANAGE_SPEC,
    MemoryManageTool,
    UserProfileManageTool,
    persona_tools,
)
from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import PersonaFile
from jarvis.domain.tools.specs import ToolResult
from jarvis.testing import InMemoryPersonaStore

MEMORY, USER = PersonaFile.MEMORY, PersonaFile.USER

FILE = "# Notes\nSome prose about tea.\n- likes green tea\n- works on the compiler\n"


@pytest.fixture
def store() -> InMemoryPersonaStore:
    return InMemoryPersonaStore()


async def run(store: InMemoryPersonaStore, **arguments: str) -> ToolResult:
    payload: JSONObject = dict(arguments)
    return await MemoryManageTool(store, max_chars=5000).execute(payload)


def memory(store: InMemoryPersonaStore) -> str:
    data = store.raw(MEMORY)
    return "" if data is None else data.decode()


def test_the_specs_mark_side_effects_and_require_an_action() -> None:
    for spec in (MEMORY_MANAGE_SPEC, USER_PROFILE_MANAGE_SPEC):
        assert spec.side_effects is True
        assert spec.parameters["required"] == ["action"]
    assert [
        t.spec.name
        for t in persona_tools(InMemoryPersonaStore(), memory_max_chars=1, user_max_chars=1)
    ] == [
        "memory_manage",
        "user_profile_manage",
    ]


async def test_add_appends_one_list_line(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, "- first")  # no final newline
    result = await run(store, action="add", entry="  - prefers\nshort   answers ")
    assert result.success
    assert result.content == "Added to MEMORY.md: - prefers short answers"
    assert result.metadata == {"file": "MEMORY.md", "changed": True}
    assert memory(store) == "- first\n- prefers short answers\n"


async def test_a_duplicate_add_says_so_and_writes_nothing(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="add", entry="likes green tea")
    assert "Already in MEMORY.md" in result.content
    assert result.metadata["changed"] is False
    assert store.writes == 0


@pytest.mark.parametrize("entry", ["", "   ", "\n", "- "])
async def test_an_empty_remove_changes_nothing(store: InMemoryPersonaStore, entry: str) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="remove", entry=entry)
    assert not result.success
    assert "'entry' is empty" in result.content
    assert memory(store) == FILE
    assert store.writes == 0


async def test_remove_without_entry_argument_changes_nothing(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    assert not (await run(store, action="remove")).success
    assert memory(store) == FILE


async def test_a_remove_matching_nothing_changes_nothing(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="remove", entry="coffee")
    assert not result.success
    assert "No entry in MEMORY.md matches 'coffee'" in result.content
    assert memory(store) == FILE


async def test_prose_lines_are_never_matched(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="remove", entry="Some prose")
    assert not result.success
    assert memory(store) == FILE


async def test_remove_by_exact_entry_or_unique_part(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    assert (await run(store, action="remove", entry="- likes green tea")).success
    assert memory(store) == "# Notes\nSome prose about tea.\n- works on the compiler\n"
    result = await run(store, action="remove", entry="COMPILER")
    assert result.content == "Removed from MEMORY.md: - works on the compiler"
    assert memory(store) == "# Notes\nSome prose about tea.\n"


async def test_update_replaces_exactly_one_entry(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="update", entry="green tea", new_entry="likes oolong")
    assert result.success
    assert memory(store) == FILE.replace("- likes green tea", "- likes oolong")


async def test_an_ambiguous_update_changes_nothing_and_lists_candidates(
    store: InMemoryPersonaStore,
) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="update", entry="E", new_entry="x")
    assert not result.success
    assert "matches 2 entries" in result.content
    assert "- likes green tea" in result.content
    assert "- works on the compiler" in result.content
    assert memory(store) == FILE


async def test_an_exact_match_wins_over_substring_matches(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, "- tea\n- green tea\n")
    assert (await run(store, action="remove", entry="tea")).success
    assert memory(store) == "- green tea\n"


async def test_update_needs_a_new_entry(store: InMemoryPersonaStore) -> None:
    store.put(MEMORY, FILE)
    result = await run(store, action="update", entry="green tea")
    assert "'new_entry' is empty" in result.content
    assert memory(store) == FILE


async def test_the_file_cannot_grow_past_its_limit(store: InMemoryPersonaStore) -> None:
    tool = MemoryManageTool(store, max_chars=40)
    assert (await tool.execute({"action": "add", "entry": "a" * 30})).success
    result = await tool.execute({"action": "add", "entry": "b" * 30})
    assert not result.success
    assert "over its limit of 40" in result.content
    assert memory(store) == "- " + "a" * 30 + "\n"
    shrink = await tool.execute({"action": "update", "entry": "a" * 30, "new_entry": "a"})
    assert shrink.success


async def test_an_overlong_entry_is_refused(store: InMemoryPersonaStore) -> None:
    result = await run(store, action="add", entry="x" * 501)
    assert not result.success
    assert store.raw(MEMORY) is None


async def test_read_shows_the_file_or_says_it_is_empty(store: InMemoryPersonaStore) -> None:
    assert (await run(store, action="read")).content == "MEMORY.md is empty."
    store.put(MEMORY, FILE)
    assert (await run(store, action="read")).content == FILE.strip()


async def test_the_tools_never_touch_a_named_persona(store: InMemoryPersonaStore) -> None:
    store.put(USER, "- work profile\n", persona="work")
    tool = UserProfileManageTool(store, max_chars=3000)
    await tool.execute({"action": "add", "entry": "name: Ada"})
    await tool.execute({"action": "remove", "entry": "work profile"})
    assert store.raw(USER, persona="work") == b"- work profile\n"
    assert store.raw(USER) == b"- name: Ada\n"


@pytest.mark.parametrize(
    "arguments",
    [{"action": "delete", "entry": "x"}, {"entry": "x"}, {"action": "add", "entry": 3}],
)
async def test_bad_arguments_are_failed_results(
    store: InMemoryPersonaStore, arguments: JSONObject
) -> None:
    result = await MemoryManageTool(store, max_chars=100).execute(arguments)
    assert not result.success
    assert result.content.startswith("Error:")
    assert store.writes == 0


async def test_a_file_that_cannot_be_rewritten_is_a_failed_result(
    store: InMemoryPersonaStore,
) -> None:
    store.put(MEMORY, b"caf\xe9\n")
    result = await run(store, action="add", entry="x")
    assert not result.success
    assert "not valid UTF-8" in result.content
    assert store.raw(MEMORY) == b"caf\xe9\n"
