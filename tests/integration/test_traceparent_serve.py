"""A caller's W3C ``traceparent`` through a real ``jarvis serve`` process: the runs it
starts continue the caller's trace, in the local store and in what an OTLP/HTTP receiver
gets (the caller's trace id, the run span under the caller's span), on every route that
starts a run (the OpenAI-compatible chat, fast path and FastAPI route, and the
managed agents); a malformed header is ignored (the run starts a trace of its own)."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import httpx
import pytest

from tests.support.otlp_receiver import OtlpReceiver
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call
from tests.support.serve_process import jarvis_serve

pytestmark = pytest.mark.integration


def _caller() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def _chat(url: str, header: str, content_type: str = "application/json") -> None:
    response = httpx.post(
        url + "/v1/chat/completions",
        content=json.dumps(
            {"model": "jarvis/simple", "messages": [{"role": "user", "content": "Hi?"}]}
        ),
        headers={"traceparent": header, "content-type": content_type},
        timeout=60,
    )
    assert response.status_code == 200, response.text


def _runs_exported(receiver: OtlpReceiver, runs: int) -> list[dict[str, object]]:
    """Every span, once ``runs`` run spans arrived (the writer exports in batches)."""
    deadline = time.monotonic() + 60
    while True:
        spans = receiver.spans()
        if sum(1 for s in spans if str(s["name"]).startswith("invoke_agent")) >= runs:
            return spans
        assert time.monotonic() < deadline, spans
        time.sleep(0.05)


def test_served_runs_continue_the_callers_trace(jarvis_home: Path) -> None:
    fast, routed, managed, streamed = (_caller() for _ in range(4))
    bad_headers = [
        f"01-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01",  # another version
        f"00-{'0' * 32}-{secrets.token_hex(8)}-01",  # all-zero trace id
        f"00-{secrets.token_hex(16)}-{'0' * 16}-01",  # all-zero parent
        f"00-{secrets.token_hex(16).upper()}-{secrets.token_hex(8)}-01",  # upper case
        f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01-extra",
        "garbage",
    ]
    replies = [Reply("Hello.") for _ in range(3 + len(bad_headers))]
    replies[3:3] = [
        Reply(tool_calls=[tool_call("call_1", "calculator", {"expression": "2+3"})]),
        Reply("It is 5."),
    ]
    with OtlpReceiver() as receiver, ScriptedEngine(replies) as engine:
        (jarvis_home / "config.toml").write_text(
            f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
            f'[engine.openai]\nbase_url = "{engine.url}"\n'
            f'[traces]\nenabled = true\n[otel]\nendpoint = "{receiver.endpoint}"\n'
        )
        with jarvis_serve() as served:
            url = served.url
            _chat(url, fast[2])  # the fast path
            _chat(url, routed[2], "application/vnd.test+json")  # FastAPI's route
            created = httpx.post(
                url + "/v1/managed-agents",
                json={"id": "tracer", "agent": "simple"},
                timeout=30,
            )
            assert created.status_code == 201, created.text
            posted = httpx.post(
                url + "/v1/managed-agents/tracer/messages", json={"content": "Hi?"}, timeout=30
            )
            assert posted.status_code == 202, posted.text
            run = httpx.post(
                url + "/v1/managed-agents/tracer/run",
                headers={"traceparent": managed[2]},
                timeout=60,
            )
            assert run.status_code == 200, run.text
            created = httpx.post(
                url + "/v1/managed-agents",
                json={"id": "counter", "agent": "orchestrator", "tools": ["calculator"]},
                timeout=30,
            )
            assert created.status_code == 201, created.text
            with httpx.stream(
                "POST",
                url + "/v1/managed-agents/counter/messages",
                json={"content": "2+3?", "stream": True},
                headers={"traceparent": streamed[2]},
                timeout=60,
            ) as stream:
                assert stream.status_code == 200
                assert b"[DONE]" in b"".join(stream.iter_bytes())
            for header in bad_headers:
                _chat(url, header)
            spans = _runs_exported(receiver, 4 + len(bad_headers))
    by_trace: dict[str, list[dict[str, object]]] = {}
    for span in spans:
        by_trace.setdefault(str(span["traceId"]), []).append(span)
    for trace_id, parent_id, _ in (fast, routed, managed, streamed):
        assert trace_id in by_trace
        mine = by_trace[trace_id]
        roots = [s for s in mine if str(s["name"]).startswith("invoke_agent")]
        assert len(roots) == 1
        assert roots[0]["parentSpanId"] == parent_id  # the run hangs under the caller
        ids = {s["spanId"] for s in mine}
        assert all(s["parentSpanId"] in ids for s in mine if s is not roots[0])
    tool_spans = [s for s in by_trace[streamed[0]] if s["name"] == "execute_tool calculator"]
    assert len(tool_spans) == 1
    assert tool_spans[0]["parentSpanId"] in {s["spanId"] for s in by_trace[streamed[0]]}
    # a malformed traceparent is ignored: those runs have traces of their own, no parent
    assert len(by_trace) == 4 + len(bad_headers)
    for header in bad_headers:
        assert all(not header.lower().startswith(f"00-{t}") for t in by_trace)
    own = [s for s in spans if str(s["name"]).startswith("invoke_agent")]
    assert sum(1 for s in own if "parentSpanId" not in s) == len(bad_headers)

    # the local store keeps the run's own id and the trace it continues
    import os
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "list", "--json", "--limit", "50"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    continued = {
        (t["continues"]["trace_id"], t["continues"]["parent_span_id"])
        for t in json.loads(listed.stdout)
        if t["continues"]
    }
    assert continued == {(t, p) for t, p, _ in (fast, routed, managed, streamed)}
    [mine] = [
        t for t in json.loads(listed.stdout) if (t["continues"] or {}).get("trace_id") == fast[0]
    ]
    shown = subprocess.run(
        [sys.executable, "-m", "jarvis", "traces", "show", str(mine["id"])],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"continues trace {fast[0]} under span {fast[1]}" in shown.stdout


def test_a_client_traced_by_the_opentelemetry_sdk_gets_jarvis_runs_in_its_trace(
    jarvis_home: Path,
) -> None:
    """The caller is instrumented with the OpenTelemetry SDK (its own W3C propagator and
    in-memory exporter): the run jarvis exports hangs under the SDK's client span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("caller")
    with OtlpReceiver() as receiver, ScriptedEngine([Reply("Hello.")]) as engine:
        (jarvis_home / "config.toml").write_text(
            f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
            f'[engine.openai]\nbase_url = "{engine.url}"\n'
            f'[otel]\nendpoint = "{receiver.endpoint}"\nprotocol = "http/protobuf"\n'
        )
        with jarvis_serve() as served, tracer.start_as_current_span("ask jarvis"):
            headers: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(headers)
            _chat(served.url, headers["traceparent"])
            spans = _runs_exported(receiver, 1)
    provider.shutdown()
    [client] = exporter.get_finished_spans()
    context = client.get_span_context()
    assert context is not None
    trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
    assert {s["traceId"] for s in spans} == {trace_id}
    [run] = [s for s in spans if str(s["name"]).startswith("invoke_agent")]
    assert run["parentSpanId"] == span_id
