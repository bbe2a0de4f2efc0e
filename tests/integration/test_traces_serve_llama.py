"""Traces of ``jarvis serve`` runs on the real llama.cpp server: two questions answered at
once become two traces, each with its own inference and the tokens llama.cpp counted."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from jarvis.domain.traces import TraceQuery
from tests.support.llama_server import LlamaServer
from tests.support.serve import serving

pytestmark = pytest.mark.integration


def test_concurrent_served_runs_are_separate_traces(
    llama_server: LlamaServer, jarvis_home: Path
) -> None:
    (jarvis_home / "config.toml").write_text("[traces]\nenabled = true\n")
    with serving(
        engine="openai", base_url=llama_server.base_url, model=llama_server.model
    ) as served:

        def ask(question: str) -> str:
            response = httpx.post(
                served.url + "/v1/chat/completions",
                json={
                    "model": "jarvis/simple",
                    "messages": [{"role": "user", "content": question}],
                    "max_tokens": 16,
                    "temperature": 0,
                },
                timeout=120,
            )
            assert response.status_code == 200, response.text
            return str(response.json()["choices"][0]["message"]["content"])

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(ask, ["Capital of France?", "Capital of Italy?"]))
        assert all(answers)
        writer = served.runtime.container.trace_writer()
        assert writer is not None
        writer.flush()
        traces = served.runtime.container.trace_store().list(TraceQuery())
    assert len(traces) == 2
    for trace in traces:
        assert trace.status == "ok"
        assert [s.kind for s in trace.spans] == ["run", "inference"]
        inference = trace.spans[1]
        assert inference.parent_id == trace.spans[0].span_id
        assert inference.attributes["engine"] == "openai"
        assert isinstance(inference.attributes["tokens_in"], int)
        assert inference.attributes["tokens_in"] > 0
        assert isinstance(inference.attributes["tokens_out"], int)
        assert 0 < inference.attributes["tokens_out"] <= 16
