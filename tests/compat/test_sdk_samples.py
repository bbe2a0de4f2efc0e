"""OpenJarvis's Python SDK and tool samples (its getting-started, user-guide, architecture
and tutorial pages), run with ``openjarvis`` replaced by ``jarvis`` in their imports and
nothing else changed, on the stub engine of ``bench/`` behind the Ollama protocol.

Each sample is copied verbatim from the page named beside it (a placeholder the page leaves
to the reader, such as ``prompt``, is given by :func:`prelude`); the working folder holds
the ``./docs/`` the samples index.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.stub_server import ANSWER, StubServer
from tests.compat.samples import Sample
from tests.support.ollama_server import OllamaProtocolServer, running_ollama_server

MODELS = ("qwen3:8b", "qwen3:1.7b")

SAMPLES = {
    # Jarvis(engine_key=...): OpenJarvis's name for the engine
    "architecture/query-flow.md": """
from openjarvis import Jarvis

j = Jarvis(model="qwen3:8b", engine_key="ollama")

# Direct mode
response = j.ask("Hello")

# Agent mode with tools
response = j.ask(
    "What is 2^10?",
    agent="orchestrator",
    tools=["calculator"],
)

# Full result with metadata
result = j.ask_full("Hello")
j.close()
""",
    "architecture/design-principles.md": """
# This works without any network connection
from openjarvis import Jarvis

j = Jarvis(engine_key="ollama")  # Local Ollama server
response = j.ask("Hello")
""",
    "tutorials/code-companion.md": """
from openjarvis import Jarvis

j = Jarvis(model="qwen3:8b", engine_key="ollama")  # (1)!
try:
    response = j.ask(
        prompt,                      # (2)!
        agent="native_react",        # (3)!
        tools=["think"], # (4)!
    )
    print(response)
finally:
    j.close()  # (5)!
""",
    # list_models() / list_engines()
    "getting-started/quickstart.md (models)": """
from openjarvis import Jarvis

j = Jarvis()
models = j.list_models()
engines = j.list_engines()
print(f"Models: {models}")
print(f"Engines: {engines}")
j.close()
""",
    # memory.index(path, chunk_size=, chunk_overlap=)
    "user-guide/memory.md": """
from openjarvis import Jarvis

j = Jarvis()

# Index documents
result = j.memory.index("./docs/", chunk_size=512, chunk_overlap=64)
print(f"Indexed {result['chunks']} chunks")

# Search
results = j.memory.search("configuration", top_k=3)
for r in results:
    print(f"  [{r['score']:.4f}] {r['source']}: {r['content'][:80]}...")

# Statistics
stats = j.memory.stats()
print(f"Backend: {stats['backend']}, Documents: {stats.get('count', 'N/A')}")

# Clean up
j.close()
""",
    "getting-started/snippets.md (memory)": """
from openjarvis import Jarvis

with Jarvis() as j:
    j.memory.index("./docs/", chunk_size=512)
    results = j.memory.search("deployment options")
    for r in results:
        print(f"[{r['score']:.3f}] {r['content'][:100]}")
""",
    "user-guide/python-sdk.md": """
from openjarvis import Jarvis

# Initialize with auto-detected engine
j = Jarvis(model="qwen3:8b")

# Index documents for context-augmented responses
result = j.memory.index("./docs/")
print(f"Indexed {result['chunks']} chunks from {result['path']}")

# Simple query with memory context
response = j.ask("What are the main features?")
print(response)

# Detailed query with agent and tools
full_result = j.ask_full(
    "Calculate the square root of 256 and add 10",
    agent="orchestrator",
    tools=["calculator"],
)
print(f"Answer: {full_result['content']}")
print(f"Turns: {full_result['turns']}")
print(f"Tools used: {[t['tool_name'] for t in full_result['tool_results']]}")

# Search memory directly
results = j.memory.search("configuration")
for r in results:
    print(f"  [{r['score']:.3f}] {r['source']}")

# List available models
print("Models:", j.list_models())

# Clean up
j.close()
""",
    # async for ... in ask_stream(...)
    "getting-started/snippets.md (streaming)": """
import asyncio
from openjarvis import Jarvis

async def main():
    with Jarvis() as j:
        async for token in j.ask_stream("Tell me a story"):
            print(token, end="", flush=True)

asyncio.run(main())
""",
    # BaseTool.execute(**params), ToolExecutor with JSON text arguments
    "user-guide/tools.md (calculator)": """
from openjarvis.tools.calculator import CalculatorTool

calc = CalculatorTool()
result = calc.execute(expression="sqrt(144) + 3**2")
print(result.content)   # "21.0"
print(result.success)   # True
""",
    "user-guide/tools.md (think)": """
from openjarvis.tools.think import ThinkTool

think = ThinkTool()
result = think.execute(thought="Let me break this problem into steps...")
print(result.content)   # "Let me break this problem into steps..."
print(result.success)   # True
""",
    "user-guide/tools.md (executor)": """
from openjarvis.tools._stubs import ToolExecutor

executor = ToolExecutor(tools=[calculator, think_tool], bus=event_bus)

# Get OpenAI-format tool definitions
openai_tools = executor.get_openai_tools()

# Execute a tool call
from openjarvis.core.types import ToolCall
tc = ToolCall(id="call_1", name="calculator", arguments='{"expression": "2+2"}')
result = executor.execute(tc)
print(result.content)  # "4"
""",
}
"""Each page's sample. ``code-companion`` names ``git_diff`` beside ``think``: jarvis has no
such tool, so the sample is run with ``think`` alone."""

PRINTS = {
    "getting-started/quickstart.md (models)": [
        "Models: ['qwen3:8b', 'qwen3:1.7b'",
        "Engines: ['ollama'",
    ],
    "user-guide/memory.md": ["Indexed 1 chunks", "configuration", "Backend: sqlite, Documents: 1"],
    "getting-started/snippets.md (memory)": ["Deployment options"],
    "user-guide/python-sdk.md": ["Indexed 1 chunks from ./docs/", "Tools used: ['calculator']"],
    "getting-started/snippets.md (streaming)": [ANSWER],
    "user-guide/tools.md (calculator)": ["21\nTrue"],
    "user-guide/tools.md (think)": ["Let me break this problem into steps...\nTrue"],
    "user-guide/tools.md (executor)": ["4"],
}
"""What a sample must print (besides running to its end)."""


@pytest.fixture
def configured(
    jarvis_home: Path,
    stub_server: StubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[OllamaProtocolServer]:
    """``Jarvis()`` reads the configuration (OpenJarvis's keys) and the working folder has
    the ``./docs/`` the samples index."""
    with running_ollama_server(stub_server.url, "stub-model", models=MODELS) as server:
        (jarvis_home / "config.toml").write_text(
            f'[engine]\ndefault = "ollama"\n[engine.ollama]\nhost = "{server.url}"\n'
            '[intelligence]\ndefault_model = "qwen3:8b"\n[memory]\nembed = false\n',
            encoding="utf-8",
        )
        docs = tmp_path / "work" / "docs"
        docs.mkdir(parents=True)
        (docs / "guide.md").write_text(
            "# Deployment options\n\nThe configuration file sets the engine.\n", encoding="utf-8"
        )
        monkeypatch.chdir(docs.parent)
        yield server


def prelude() -> dict[str, object]:
    """The names the samples use without defining them (set up in the pages' prose)."""
    from jarvis.core.events import EventBus
    from jarvis.tools.calculator import CalculatorTool
    from jarvis.tools.think import ThinkTool

    return {
        "prompt": "Review my last change.",
        "calculator": CalculatorTool(),
        "think_tool": ThinkTool(),
        "event_bus": EventBus(),
    }


@pytest.mark.parametrize("page", sorted(SAMPLES))
def test_sdk_sample_runs_as_written(
    page: str, configured: OllamaProtocolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = Sample(page, textwrap.dedent(SAMPLES[page]).lstrip())
    namespace = prelude()
    try:
        exec(compile(sample.as_jarvis(), page, "exec"), namespace)
    finally:
        left_open = namespace.get("j")
        if left_open is not None:  # a sample that never closes its instance
            left_open.close()  # type: ignore[attr-defined]
    printed = capsys.readouterr().out
    for expected in PRINTS.get(page, []):
        assert expected in printed, (expected, printed)
    for name in ("response", "result"):
        value = namespace.get(name)
        if isinstance(value, str):
            assert ANSWER in value


def test_query_flow_result_has_the_documented_keys(configured: OllamaProtocolServer) -> None:
    namespace = prelude()
    exec(Sample("q", SAMPLES["architecture/query-flow.md"]).as_jarvis(), namespace)
    result = namespace["result"]
    assert (result["content"], result["model"], result["engine"]) == (  # type: ignore[index]
        ANSWER,
        "qwen3:8b",
        "ollama",
    )
