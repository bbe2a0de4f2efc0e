"""One CodeAct or RLM instance serves concurrent runs: each run has its own interpreter,
context, sub-model callbacks and context-window budget, nothing of it on the agent.

The engine forces the interleaving instead of hoping for it: each run's second request
waits until the other run has made its second request too, so both runs' REPL sessions are
alive at the same moment. Runs serialised by the agent would wait for each other forever
(the test gives up after 10 s, a failure, never a pass by luck).
"""

from __future__ import annotations

import asyncio

import pytest

from jarvis.domain.agents.native_openhands import NativeOpenHandsAgent
from jarvis.domain.agents.rlm import RecursiveLMAgent
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role
from jarvis.domain.loop.repl_agent import ReplUsingAgent
from jarvis.domain.run.contract import AgentContext
from jarvis.testing import InMemoryRepl, ScriptedInference

RUNS = ("A", "B")


class Rendezvous(ScriptedInference):
    """Answers each run from its own script; a run's second request waits for the other
    run's second request (a two-party barrier that never depends on timing)."""

    def __init__(self, scripts: dict[str, list[str]]) -> None:
        super().__init__()
        self.scripts = scripts
        self.turns = dict.fromkeys(scripts, 0)
        self.arrived = {run: asyncio.Event() for run in scripts}
        self.order: list[str] = []

    @staticmethod
    def run_of(request: InferenceRequest) -> str:
        task = next(m.content for m in request.messages if m.role is Role.USER)
        return next(run for run in RUNS if f"task {run}" in task)

    async def generate(self, request: InferenceRequest) -> Completion:
        self.requests.append(request)
        run = self.run_of(request)
        turn = self.turns[run] = self.turns[run] + 1
        self.order.append(f"{run}{turn}")
        if turn == 2:
            self.arrived[run].set()
            other = next(r for r in RUNS if r != run)
            await self.arrived[other].wait()
        reply = self.scripts[run][turn - 1]
        last = request.messages[-1].content
        return Completion(content=reply.replace("{last}", last.rsplit("\n", 1)[-1]))


async def both(agent: ReplUsingAgent, contexts: dict[str, AgentContext | None]) -> list[str]:
    results = await asyncio.wait_for(
        asyncio.gather(*(agent.arun(f"task {run}", contexts[run]) for run in RUNS)), 10
    )
    return [result.content for result in results]


async def test_one_codeact_instance_runs_two_interleaved_runs_each_in_its_own_repl() -> None:
    engine = Rendezvous(
        {
            run: [
                f"```python\nsecret = '{run}'\n```",
                "```python\nprint(secret)\n```",
                "Final Answer: {last}",
            ]
            for run in RUNS
        }
    )
    repl = InMemoryRepl()
    agent = NativeOpenHandsAgent(engine, "m", repl=repl)
    assert await both(agent, {"A": None, "B": None}) == ["A", "B"]
    assert engine.order.index("A2") < engine.order.index("B3")  # both were mid-run at once
    assert engine.order.index("B2") < engine.order.index("A3")
    assert sorted([code.strip() for code in s.executed] for s in repl.sessions) == [
        ["secret = 'A'", "print(secret)"],
        ["secret = 'B'", "print(secret)"],
    ]
    for session in repl.sessions:  # each run closed its own session when it ended
        with pytest.raises(RuntimeError, match="closed"):
            await session.set_variable("x", "1")


async def test_one_rlm_instance_runs_two_interleaved_runs_on_their_own_context() -> None:
    engine = Rendezvous(
        {
            run: [
                "```python\nsize = len(context)\n```",
                "```python\nFINAL(context.split()[0] + ' ' + str(size))\n```",
            ]
            for run in RUNS
        }
    )
    contexts: dict[str, AgentContext | None] = {
        "A": AgentContext(metadata={"context": "alpha " * 10}),
        "B": AgentContext(metadata={"context": "beta " * 3}),
    }
    agent = RecursiveLMAgent(engine, "m", repl=InMemoryRepl())
    results = await asyncio.wait_for(
        asyncio.gather(*(agent.arun(f"task {run}", contexts[run]) for run in RUNS)), 10
    )
    assert [r.content for r in results] == ["alpha 60", "beta 15"]
    assert [r.metadata["context_chars"] for r in results] == [60, 15]
    assert [r.metadata["code_executions"] for r in results] == [2, 2]
    assert set(engine.order) == {"A1", "A2", "B1", "B2"}
