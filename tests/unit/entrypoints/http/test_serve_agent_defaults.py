"""``[agent] temperature`` and ``max_tokens`` reach every served run that sets none, as they
reach ``jarvis ask``: AskService applies them, once, for the routes and managed agents
alike; what a request or a definition sets wins."""

from __future__ import annotations

from pathlib import Path

import httpx

from jarvis.testing import ScriptedInference
from tests.support.serve import serving

CONFIG = "[agent]\ntemperature = 0.25\nmax_tokens = 77\n"


def test_agent_defaults_apply_to_chat_completions_and_managed_agents(jarvis_home: Path) -> None:
    (jarvis_home / "config.toml").write_text(CONFIG, encoding="utf-8")
    engine = ScriptedInference(["one", "two", "three", "four"])
    question = {"messages": [{"role": "user", "content": "hi"}]}
    with serving(engine) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        client.post("/v1/managed-agents", json={"id": "plain"}).raise_for_status()
        client.post(
            "/v1/managed-agents", json={"id": "own", "temperature": 0.9, "max_tokens": 5}
        ).raise_for_status()
        for model in ("jarvis/simple", "plain", "own"):
            client.post(
                "/v1/chat/completions", json={"model": model, **question}
            ).raise_for_status()
        client.post(
            "/v1/managed-agents/plain/messages", json={"content": "hi", "stream": False}
        ).raise_for_status()
        client.post("/v1/managed-agents/plain/run").raise_for_status()
    sampled = [(r.temperature, r.max_tokens) for r in engine.requests]
    assert sampled == [(0.25, 77), (0.25, 77), (0.9, 5), (0.25, 77)]
