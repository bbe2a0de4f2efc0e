"""``native_openhands`` and ``rlm`` end to end: the real ``jarvis`` command, the real local
llama.cpp server (SmolLM2-135M, a 2048-token context) and the real isolated REPL.

A model this small follows the protocols loosely; what must hold is that every run ends by
itself, within its turn budget, with a clear stop reason and exit code 0. For the RLM the
context file is a hundred times larger than the model's context window, so the run can only
succeed if the context stays out of the prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.llama_server import LlamaServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JARVIS = [sys.executable, "-m", "jarvis"]


def ask(server: LlamaServer, home: Path, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENJARVIS_HOME"] = str(home)
    completed = subprocess.run(
        [
            *JARVIS,
            "ask",
            *server.ask_options(max_tokens=160),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert isinstance(data, dict)
    return data


def test_rlm_answers_over_a_context_far_larger_than_the_window(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    context = tmp_path / "big.txt"
    context.write_text(
        "".join(f"Entry {n}: the colour of item {n} is blue.\n" for n in range(5_000)),
        encoding="utf-8",
    )
    assert context.stat().st_size > 100 * llama_server.n_ctx
    data = ask(
        llama_server,
        tmp_path,
        "--agent",
        "rlm",
        "--context-file",
        str(context),
        "-O",
        "max_turns=3",
        "-O",
        "max_output_chars=1500",
        "What colour is item 42? Use the REPL.",
    )
    assert data["stop_reason"] in ("final_answer", "max_turns")
    turns = data["turns"]
    assert isinstance(turns, int)
    assert 1 <= turns <= 4
    assert isinstance(data["content"], str)
    assert data["content"].strip()


def test_native_openhands_runs_to_a_bounded_end(llama_server: LlamaServer, tmp_path: Path) -> None:
    data = ask(
        llama_server,
        tmp_path,
        "--agent",
        "native_openhands",
        "-O",
        "max_turns=2",
        "-O",
        "max_prompt_tokens=1500",
        "Write Python code that prints the sum of the numbers from 1 to 100.",
    )
    assert data["stop_reason"] in ("final_answer", "max_turns", "parse_error")
    turns = data["turns"]
    assert isinstance(turns, int)
    assert 1 <= turns <= 3
    assert isinstance(data["content"], str)
