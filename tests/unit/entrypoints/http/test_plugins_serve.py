"""A plug-in agent and tool of ``[plugins] modules`` through ``jarvis serve`` (managed
agents and the OpenAI-compatible endpoint), as the CLI reaches them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jarvis.testing import ScriptedInference
from tests.support.plugin_module import write_plugin_module
from tests.support.serve import serving


@pytest.fixture
def plugin_module(
    tmp_path: Path, jarvis_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    name = write_plugin_module(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (jarvis_home / "config.toml").write_text(f'[plugins]\nmodules = ["{name}"]\n')
    yield name
    sys.modules.pop(name, None)


def test_plugin_agent_runs_as_a_managed_agent_and_a_model(plugin_module: str) -> None:
    with (
        serving(ScriptedInference(["unused"]), model="m") as served,
        httpx.Client(base_url=served.url) as client,
    ):
        client.post("/v1/managed-agents", json={"id": "r", "agent": "reverse"}).raise_for_status()
        client.post("/v1/managed-agents/r/messages", json={"content": "abc"}).raise_for_status()
        ran = client.post("/v1/managed-agents/r/run")
        listed = client.get("/v1/models").json()
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "jarvis/reverse", "messages": [{"role": "user", "content": "xyz"}]},
        )
    assert ran.status_code == 200, ran.text
    assert ran.json()["content"] == "cba"
    assert "jarvis/reverse" in [m["id"] for m in listed["data"]]
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "zyx"


def test_plugin_tool_is_given_to_a_tool_agent(plugin_module: str) -> None:
    from jarvis.domain.llm.completion import Completion
    from jarvis.domain.llm.messages import ToolCall

    call = ToolCall(id="c1", name="count_letters", arguments={"text": "a1b2c"})
    engine = ScriptedInference(
        [Completion(content="", tool_calls=(call,), finish_reason="tool_calls"), "3 letters."]
    )
    with (
        serving(engine, model="m") as served,
        httpx.Client(base_url=served.url) as client,
    ):
        client.post(
            "/v1/managed-agents",
            json={"id": "t", "agent": "orchestrator", "tools": ["count_letters"]},
        ).raise_for_status()
        client.post("/v1/managed-agents/t/messages", json={"content": "count"}).raise_for_status()
        ran = client.post("/v1/managed-agents/t/run")
    assert ran.status_code == 200, ran.text
    assert ran.json()["tool_results"][0]["output"] == "3"
