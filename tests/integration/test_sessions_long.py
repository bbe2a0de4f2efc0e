"""``jarvis sessions show`` / ``export`` of a 100,000-message session, through the CLI
process: they stream the session from the store a page at a time, so their peak memory
hardly grows with the session (it grew by 100-220 MB when the whole session was read and
formatted at once). Peak RSS is the process's own high-water mark (``ru_maxrss`` of
``wait4``), measured by a small launcher process so that the test runner's memory, copied
into a child it forks, is not counted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jarvis.domain.llm.messages import Message
from tests.support.sql_stores import sqlite_sessions

pytestmark = pytest.mark.integration

MESSAGES = 100_000
GROWTH_BOUND_MB = 48.0
"""Peak RSS above that of showing a one-message session (measured: 2-13 MB streamed,
104-220 MB read whole)."""

_LAUNCHER = """
import os, subprocess, sys
with open(sys.argv[1], "wb") as out:
    child = subprocess.Popen(sys.argv[2:], stdout=out, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_mb(output: Path, *args: str) -> float:
    """Run ``jarvis ARGS`` with stdout into ``output``; its peak RSS in MB."""
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(output), sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=os.environ.copy(),
    )
    assert launched.returncode == 0, launched.stderr
    code, max_rss_kb = launched.stdout.split()
    assert code == "0", launched.stderr
    return int(max_rss_kb) / 1024


@pytest.fixture
def long_session(jarvis_home: Path) -> None:
    store = sqlite_sessions(jarvis_home / "sessions.db")
    messages = [
        Message.user(f"question {i} " + "x" * 200)
        if i % 2 == 0
        else Message.assistant(f"answer {i} " + "y" * 200)
        for i in range(MESSAGES)
    ]
    asyncio.run(store.append("long", messages))
    asyncio.run(store.append("short", [Message.user("hello")]))
    store.close()


@pytest.mark.timeout(900)  # 100,000 messages written, then read 3 times: bounded, not quick
@pytest.mark.usefixtures("long_session")
def test_show_and_export_of_a_long_session_stream_it(tmp_path: Path) -> None:
    baseline = peak_rss_mb(tmp_path / "short.txt", "sessions", "show", "short")
    runs = {
        "show": ("sessions", "show", "long"),
        "show-json": ("sessions", "show", "long", "--json"),
        "export": ("sessions", "export", "long"),
    }
    peaks = {name: peak_rss_mb(tmp_path / f"{name}.out", *args) for name, args in runs.items()}
    for name, peak in peaks.items():
        assert peak - baseline <= GROWTH_BOUND_MB, (name, peak, baseline)

    transcript = (tmp_path / "show.out").read_text().splitlines()
    assert len(transcript) == MESSAGES
    assert transcript[0].endswith("user: question 0 " + "x" * 200)
    assert f"answer {MESSAGES - 1} " in transcript[-1]
    document = json.loads((tmp_path / "show-json.out").read_text())
    assert document["message_count"] == MESSAGES
    assert [m["content"].split()[1] for m in document["messages"][:3]] == ["0", "1", "2"]
    with (tmp_path / "export.out").open() as lines:
        count = sum(1 for line in lines if json.loads(line)["role"] in ("user", "assistant"))
    assert count == MESSAGES


def test_a_short_session_streamed_as_json_is_the_same_document(
    jarvis_home: Path, tmp_path: Path
) -> None:
    store = sqlite_sessions(jarvis_home / "sessions.db")
    asyncio.run(store.append("one", [Message.user("only"), Message.assistant("yes")]))
    store.close()
    peak_rss_mb(tmp_path / "export.json", "sessions", "export", "one", "--json")
    peak_rss_mb(tmp_path / "show.json", "sessions", "show", "one", "--json")
    exported = json.loads((tmp_path / "export.json").read_text())
    shown = json.loads((tmp_path / "show.json").read_text())
    assert set(exported) == {"id", "messages"}
    assert set(shown) == {"id", "messages", "message_count"}
    for document in (exported, shown):
        assert document["id"] == "one"
        assert [(m["role"], m["content"]) for m in document["messages"]] == [
            ("user", "only"),
            ("assistant", "yes"),
        ]
    assert shown["message_count"] == 2
