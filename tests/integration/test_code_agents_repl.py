"""CodeAct and the RLM with the real isolated REPL (scripted engine): the context stays in
the worker, hostile code ends as an observation, and the run stays bounded."""

from __future__ import annotations

import time

import pytest

from jarvis.adapters.subprocess_repl import SubprocessRepl
from jarvis.domain.agents.native_openhands import NativeOpenHandsAgent
from jarvis.domain.agents.rlm import RecursiveLMAgent
from jarvis.domain.repl import ReplLimits
from jarvis.domain.run.contract import AgentContext
from jarvis.testing import ScriptedInference

pytestmark = pytest.mark.integration

LIMITS = ReplLimits(timeout_seconds=1.5, memory_mb=512)


@pytest.fixture(scope="module")
def repl() -> SubprocessRepl:
    return SubprocessRepl(limits=LIMITS)


async def test_rlm_over_a_megabyte_sends_only_kilobytes(repl: SubprocessRepl) -> None:
    lines = [f"record {n}: value {n * 7 % 1000}" for n in range(45_000)]
    lines[31_337] = "record 31337: the password is swordfish"
    context = "\n".join(lines)
    assert len(context) > 1_000_000
    scan = (
        "chunks = [context[i:i + 100_000] for i in range(0, len(context), 100_000)]\n"
        "hits = [c for c in chunks if 'password' in c]\n"
        "line = [l for l in hits[0].splitlines() if 'password' in l][0]\n"
        "answers = llm_batch([f'Which word is the password in: {l}' for l in [line] * 3])\n"
        "print(len(chunks), answers)\n"
    )
    engine = ScriptedInference(
        [
            "```python\nprint(len(context), context[:80])\n```",
            f"```python\n{scan}```",
            "swordfish",
            "swordfish",
            "swordfish",
            "```python\nFINAL(answers[0])\nprint('not reached')\n```",
        ]
    )
    agent = RecursiveLMAgent(engine, "m", repl=repl)
    result = await agent.arun("What is the password?", AgentContext(metadata={"context": context}))
    assert result.content == "swordfish"
    assert result.stop_reason == "final_answer"
    assert result.turns == 3
    assert result.metadata["sub_calls"] == 3
    sizes = [sum(len(m.content) for m in r.messages) for r in engine.requests]
    assert max(sizes) < 6_000, sizes
    assert all("record 1000:" not in m.content for r in engine.requests for m in r.messages)


async def test_codeact_survives_an_endless_loop(repl: SubprocessRepl) -> None:
    engine = ScriptedInference(
        [
            "```python\nstate = 'set'\nwhile True:\n    pass\n```",
            "```python\nprint('state' in dir())\n```",
            "Final Answer: recovered",
        ]
    )
    started = time.monotonic()
    result = await NativeOpenHandsAgent(engine, "m", repl=repl).arun("Loop forever.")
    assert result.content == "recovered"
    assert time.monotonic() - started < LIMITS.timeout_seconds + 30  # a margin for load
    first = engine.requests[1].messages[-1].content
    assert "timed out after 1.5 s" in first
    second = engine.requests[2].messages[-1].content
    assert "restarted" in second
    assert "False" in second


async def test_code_cannot_reach_the_host_secrets(
    repl: SubprocessRepl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    engine = ScriptedInference(
        ["```python\nimport os\nFINAL(os.environ.get('OPENAI_API_KEY', 'absent'))\n```"]
    )
    result = await RecursiveLMAgent(engine, "m", repl=repl).arun("key?")
    assert result.content == "absent"
