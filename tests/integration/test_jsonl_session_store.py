"""The JSON-lines session store on real files, including concurrent writers."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

import pytest

from contracts.owned_writes_contract import said
from contracts.session_store_contract import SessionStoreContract
from jarvis.adapters.session_files.store import JsonlSessionStore
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.messages import Message
from jarvis.domain.managed_agents import ManagedAgent, owner_of


class TestJsonlSessionStore(SessionStoreContract[JsonlSessionStore]):
    @pytest.fixture
    def store(self, tmp_path: Path) -> JsonlSessionStore:
        return JsonlSessionStore(tmp_path / "sessions")


async def test_a_torn_last_line_is_skipped_not_fatal(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    await store.append("s", [Message.user("kept")])
    with (tmp_path / "s.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"role": "user", "content": "half')
    assert [m.content for m in await store.load("s")] == ["kept"]


async def test_an_owned_write_or_deletion_is_refused_there_is_no_definition_to_check(
    tmp_path: Path,
) -> None:
    store = JsonlSessionStore(tmp_path)
    owner = owner_of(ManagedAgent(id="a", incarnation="x"))
    with pytest.raises(ConfigurationError, match="keeps no definitions"):
        await store.append_records("managed-agent:a", said("x"), owner=owner)
    assert await store.sessions() == []
    await store.append_records("managed-agent:a", said("x"))
    with pytest.raises(ConfigurationError, match="keeps no definitions"):
        await store.delete("managed-agent:a", owner=owner)
    assert await store.sessions() == ["managed-agent:a"]


def _writer(root: str, worker: int) -> None:
    store = JsonlSessionStore(root)
    for i in range(20):
        asyncio.run(store.append("shared", [Message.user(f"{worker}-{i}")]))


def test_concurrent_processes_lose_no_message(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(tmp_path), w)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    loaded = asyncio.run(JsonlSessionStore(tmp_path).load("shared"))
    assert sorted(m.content for m in loaded) == sorted(
        f"{w}-{i}" for w in range(4) for i in range(20)
    )


async def test_a_session_file_made_readable_by_others_is_kept_to_its_owner(
    tmp_path: Path,
) -> None:
    """A file made earlier with a wider mode (``touch`` under umask 022, a copy) would let
    every local user read what is appended to it; a folder the store makes is its owner's."""
    store = JsonlSessionStore(tmp_path / "sessions")
    await store.append("new", [Message.user("first")])
    assert (tmp_path / "sessions").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "sessions" / "new.jsonl").stat().st_mode & 0o777 == 0o600
    old = tmp_path / "sessions" / "old.jsonl"
    old.touch()
    old.chmod(0o644)
    await store.append("old", [Message.user("private")])
    assert old.stat().st_mode & 0o777 == 0o600
