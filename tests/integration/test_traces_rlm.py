"""The trace of an RLM run with the real isolated REPL (scripted engine): the sub-model's
``llm_batch`` inferences hang under the code cell that made them."""

from __future__ import annotations

import pytest

from jarvis.adapters.subprocess_repl import SubprocessRepl
from jarvis.application.traces import TraceRecorder
from jarvis.domain.agents.rlm import RecursiveLMAgent
from jarvis.domain.repl import ReplLimits
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.run.events import EventBus
from jarvis.domain.traces import Trace
from jarvis.testing import ScriptedInference

pytestmark = pytest.mark.integration


async def test_llm_batch_inferences_are_children_of_their_cell() -> None:
    traces: list[Trace] = []
    bus = EventBus()
    TraceRecorder(traces.append).attach(bus)
    engine = ScriptedInference(
        [
            "```python\nanswers = llm_batch(['one?', 'two?', 'three?'])\nprint(answers)\n```",
            "a",
            "b",
            "c",
            "```python\nFINAL(answers[0])\n```",
        ]
    )
    agent = RecursiveLMAgent(
        engine, "m", repl=SubprocessRepl(limits=ReplLimits(timeout_seconds=30)), bus=bus
    )
    result = await agent.arun("q", AgentContext(metadata={"context": "text"}))
    assert result.stop_reason == "final_answer"
    (trace,) = traces
    run = trace.spans[0]
    cells = [s for s in trace.spans if s.kind == "tool"]
    assert len(cells) == 2
    first_cell = cells[0]
    assert first_cell.parent_id == run.span_id
    sub = [s for s in trace.spans if s.kind == "inference" and s.parent_id == first_cell.span_id]
    assert len(sub) == 3
    assert all(not s.attributes.get("unfinished") for s in trace.spans)
    top = [s for s in trace.spans if s.kind == "inference" and s.parent_id == run.span_id]
    assert len(top) == 2
