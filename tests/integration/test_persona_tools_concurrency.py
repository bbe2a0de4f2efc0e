"""Concurrent memory_manage writers in separate processes: no lost entry, no torn file."""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import threading
from pathlib import Path

import pytest

from jarvis.adapters.persona_files.store import FilesystemPersonaStore
from jarvis.application.tools.persona_tools import MemoryManageTool

WORKERS = 8
ADDS = 25
_ENTRY = re.compile(r"^- w\d+-\d+$")


def _writer(root: str, worker: int) -> None:
    tool = MemoryManageTool(FilesystemPersonaStore(root), max_chars=100_000)

    async def add_all() -> None:
        for i in range(ADDS):
            result = await tool.execute({"action": "add", "entry": f"w{worker}-{i}"})
            if not result.success:
                raise RuntimeError(result.content)

    asyncio.run(add_all())


@pytest.mark.integration
@pytest.mark.slow
def test_concurrent_processes_lose_no_entry_and_never_tear_the_file(tmp_path: Path) -> None:
    memory = tmp_path / "MEMORY.md"
    torn: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                text = memory.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            if text and (not text.endswith("\n") or not all(map(_ENTRY.match, text.splitlines()))):
                torn.append(text)

    watcher = threading.Thread(target=watch)
    watcher.start()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(tmp_path), w)) for w in range(WORKERS)]
    try:
        for process in workers:
            process.start()
        for process in workers:
            process.join(120)
            assert process.exitcode == 0
    finally:
        stop.set()
        watcher.join()
    assert torn == []
    lines = memory.read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == sorted(f"- w{w}-{i}" for w in range(WORKERS) for i in range(ADDS))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".MEMORY.md.lock", "MEMORY.md"]
