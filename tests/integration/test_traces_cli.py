"""``jarvis traces``, ``jarvis stats`` and ``jarvis ask --profile`` as processes against a
scripted engine: the span tree of a run with two tool calls, a failed run, an operator
tick, content kept only when asked, and a damaged trace store that never costs an answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ports import closed_port
from tests.support.scripted_engine import MODEL, Reply, ScriptedEngine, tool_call

pytestmark = pytest.mark.integration

SECRET_EXPRESSION = "1234+4321"


def jarvis(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jarvis", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
        check=False,
    )


def configure(home: Path, url: str, traces: str = "enabled = true\n") -> None:
    (home / "config.toml").write_text(
        f'[engine]\nname = "openai"\nmodel = "{MODEL}"\n'
        f'[engine.openai]\nbase_url = "{url}"\n[traces]\n{traces}'
    )


def two_tool_calls() -> list[Reply]:
    return [
        Reply(
            tool_calls=[
                tool_call("call_1", "calculator", {"expression": SECRET_EXPRESSION}),
                tool_call("call_2", "think", {"thought": "the sum is right"}),
            ]
        ),
        Reply("The answer is 5555."),
    ]


def ask_orchestrator(*extra: str) -> subprocess.CompletedProcess[str]:
    return jarvis("ask", "-a", "orchestrator", "--tools", "calculator,think", *extra, "What is it?")


def listed(*args: str) -> list[dict[str, object]]:
    result = jarvis("traces", "list", "--json", *args)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    return data


def shown(trace_id: str) -> dict[str, object]:
    result = jarvis("traces", "show", "--json", trace_id)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_an_orchestrator_run_with_two_tool_calls_is_a_tree(jarvis_home: Path) -> None:
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url)
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    assert "5555" in answer.stdout
    (summary,) = listed()
    assert summary["agent"] == "orchestrator"
    assert summary["status"] == "ok"
    assert (summary["inferences"], summary["tool_calls"]) == (2, 2)
    trace = shown(str(summary["id"])[:8])  # a prefix finds it
    spans = trace["spans"]
    assert isinstance(spans, list)
    run = spans[0]
    assert (run["kind"], run["parent_id"], run["attributes"]["turns"]) == ("run", None, 2)
    children = [s for s in spans if s["parent_id"] == run["span_id"]]
    assert [(s["kind"], s["name"]) for s in children] == [
        ("inference", MODEL),
        ("tool", "calculator"),
        ("tool", "think"),
        ("inference", MODEL),
    ]
    inference = children[0]["attributes"]
    assert inference["engine"] == "openai"
    assert inference["finish_reason"] == "tool_calls"
    assert inference["tokens_in"] > 0
    assert "first_token_seconds" not in inference  # tool calls only: no text streamed
    assert children[3]["attributes"]["first_token_seconds"] <= children[3]["duration"]
    calculator = children[1]
    assert calculator["ok"] is True
    assert calculator["attributes"]["result_chars"] == len("5555")
    for span in spans:
        assert span["start"] >= run["start"]
        assert span["start"] + span["duration"] <= run["start"] + run["duration"] + 1e-6
        assert span["content"] == {}  # content is not kept by default
    db = (jarvis_home / "traces.db").read_bytes()
    assert SECRET_EXPRESSION.encode() not in db
    assert oct((jarvis_home / "traces.db").stat().st_mode & 0o777) == "0o600"

    waterfall = jarvis("traces", "show", str(summary["id"]))
    assert waterfall.returncode == 0, waterfall.stderr
    lines = waterfall.stdout.splitlines()
    assert lines[0].startswith(f"trace {summary['id']}  orchestrator  ok")
    assert any(line.startswith("  tool calculator") and "█" in line for line in lines)

    exported = jarvis("traces", "export", str(summary["id"]))
    assert exported.returncode == 0, exported.stderr
    otlp = json.loads(exported.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(otlp) == len(spans)
    root = otlp[0]
    assert root["name"] == "invoke_agent orchestrator"
    assert "parentSpanId" not in root
    assert all(s["parentSpanId"] == root["spanId"] for s in otlp[1:])
    chat = {a["key"]: a["value"] for a in otlp[1]["attributes"]}
    assert chat["gen_ai.operation.name"] == {"stringValue": "chat"}
    assert chat["gen_ai.request.model"] == {"stringValue": MODEL}
    assert int(chat["gen_ai.usage.input_tokens"]["intValue"]) > 0
    tool = {a["key"]: a["value"] for a in otlp[2]["attributes"]}
    assert tool["gen_ai.tool.name"] == {"stringValue": "calculator"}

    stats = jarvis("stats", "--json")
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["runs"] == 1
    assert figures["tokens_in"] == summary["tokens_in"]
    assert figures["tools"]["calculator"]["count"] == 1
    assert figures["models"][MODEL]["count"] == 2
    assert figures["engines"]["openai"]["p95_ms"] is not None
    assert figures["errors"] == {}


def test_content_is_kept_only_when_asked(jarvis_home: Path) -> None:
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url, "enabled = true\ncontent = true\n")
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    (summary,) = listed()
    spans = shown(str(summary["id"]))["spans"]
    assert isinstance(spans, list)
    assert spans[0]["content"] == {"input": "What is it?"}
    assert SECRET_EXPRESSION in spans[2]["content"]["arguments"]
    assert spans[2]["content"]["result"] == "5555"


def test_traces_are_off_by_default_and_profile_still_reports(jarvis_home: Path) -> None:
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url, "")
        answer = ask_orchestrator("--profile")
    assert answer.returncode == 0, answer.stderr
    assert not (jarvis_home / "traces.db").exists()
    lines = answer.stderr.splitlines()
    start = lines.index("profile:")
    profile = lines[start + 1 :]
    assert [line.split()[:2] for line in profile[:4]] == [
        ["inference", MODEL],
        ["tool", "calculator"],
        ["tool", "think"],
        ["inference", MODEL],
    ]
    assert profile[4].split()[:2] == ["total", "orchestrator"]
    assert "2 inferences  2 tool calls" in profile[4]
    nothing = jarvis("traces", "list")
    assert nothing.returncode == 0, nothing.stderr
    assert "[traces] enabled = true" in nothing.stdout
    assert jarvis("stats").returncode == 0
    assert not (jarvis_home / "traces.db").exists()  # reading creates no store


def test_a_failed_run_is_recorded_as_failed(jarvis_home: Path) -> None:
    with closed_port() as port:
        configure(jarvis_home, f"http://127.0.0.1:{port}/v1")
        failed = jarvis("ask", "Anyone there?")
    assert failed.returncode == 3, failed.stderr
    (summary,) = listed("--failed")
    assert summary["status"] == "error"
    assert summary["error"] == "EngineUnavailableError"
    assert listed("--agent", "orchestrator") == []
    assert listed("--since", "1h") == [summary]
    stats = json.loads(jarvis("stats", "--json").stdout)
    assert stats["errors"] == {"EngineUnavailableError": 1}
    assert stats["failed_runs"] == 1


def test_an_operator_tick_is_a_trace(jarvis_home: Path) -> None:
    with ScriptedEngine([Reply("Build 41 is green.")]) as engine:
        configure(jarvis_home, engine.url)
        assert jarvis("operators", "add", "ci", "--prompt", "Check the build.").returncode == 0
        ticked = jarvis("operators", "tick", "ci")
    assert ticked.returncode == 0, ticked.stderr
    (summary,) = listed()
    assert summary["agent"] == "operative"
    assert summary["status"] == "ok"
    assert summary["inferences"] == 1


def test_a_damaged_trace_store_never_costs_the_answer(jarvis_home: Path) -> None:
    (jarvis_home / "traces.db").write_bytes(b"not a database, " * 1000)
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url)
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    assert "5555" in answer.stdout
    notices = [line for line in answer.stderr.splitlines() if "traces are not" in line]
    assert len(notices) == 1, answer.stderr
    assert "Traceback" not in answer.stderr
    listing = jarvis("traces", "list")
    assert listing.returncode == 7
    assert "the trace store cannot be read" in listing.stderr
    assert "Traceback" not in listing.stderr
    assert (jarvis_home / "traces.db").read_bytes() == b"not a database, " * 1000


def test_bad_input_is_a_usage_error(jarvis_home: Path) -> None:
    configure(jarvis_home, "http://127.0.0.1:9/v1")
    bad = jarvis("traces", "list", "--since", "yesterday")
    assert bad.returncode == 2
    assert "--since 'yesterday' is not a duration" in bad.stderr
    unknown = jarvis("traces", "show", "feedface")
    assert unknown.returncode == 2
    assert "No trace 'feedface'" in unknown.stderr


def test_a_locked_trace_store_never_costs_the_answer(jarvis_home: Path) -> None:
    """Another process holds traces.db's write lock for the whole run: the run answers, one
    notice on stderr, and the other process's transaction is untouched."""
    import sqlite3

    from contracts.trace_store_contract import make_trace
    from jarvis.adapters.sqlite_traces import SqliteTraceStore

    store = SqliteTraceStore(jarvis_home / "traces.db")
    store.save(make_trace("kept"))
    store.close()
    holder = sqlite3.connect(jarvis_home / "traces.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with ScriptedEngine(two_tool_calls()) as engine:
            configure(jarvis_home, engine.url)
            answer = ask_orchestrator()
        holder.execute("COMMIT")
    finally:
        holder.close()
    assert answer.returncode == 0, answer.stderr
    assert "5555" in answer.stdout
    notices = [line for line in answer.stderr.splitlines() if "traces are not" in line]
    assert len(notices) == 1, answer.stderr
    assert "locked" in notices[0]
    assert "Traceback" not in answer.stderr
    assert [t["id"] for t in listed()] == ["kept"]


def test_telemetry_alone_records_runs_without_content(jarvis_home: Path) -> None:
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url, "content = true\n[telemetry]\nenabled = true\n")
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    (summary,) = listed()
    spans = shown(str(summary["id"]))["spans"]
    assert isinstance(spans, list)
    assert all(span["content"] == {} for span in spans)  # content needs [traces] enabled
    stats = jarvis("stats")
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.startswith("since 7d: 1 runs (0 failed)")
    assert "calculator" in stats.stdout
    assert "not being recorded" not in stats.stderr


def test_runs_are_exported_to_an_otlp_receiver(jarvis_home: Path) -> None:
    from tests.support.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver, ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url, f'[otel]\nendpoint = "{receiver.endpoint}"\n')
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    assert not (jarvis_home / "traces.db").exists()  # exported, not kept
    assert receiver.paths == ["/v1/traces"]
    spans = receiver.spans()
    assert [s["name"] for s in spans] == [
        "invoke_agent orchestrator",
        f"chat {MODEL}",
        "execute_tool calculator",
        "execute_tool think",
        f"chat {MODEL}",
    ]
    attributes = [{a["key"]: a["value"] for a in s["attributes"]} for s in spans]  # type: ignore[attr-defined]
    assert attributes[1]["gen_ai.operation.name"] == {"stringValue": "chat"}
    assert attributes[1]["gen_ai.request.model"] == {"stringValue": MODEL}
    assert int(attributes[1]["gen_ai.usage.output_tokens"]["intValue"]) > 0
    assert attributes[2]["gen_ai.tool.name"] == {"stringValue": "calculator"}
    assert all(not k.startswith("jarvis.content") for a in attributes for k in a)
    assert SECRET_EXPRESSION not in json.dumps(receiver.requests)


def test_a_receiver_that_is_down_costs_no_answer(
    jarvis_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with closed_port() as port, ScriptedEngine(two_tool_calls()) as engine:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        configure(jarvis_home, engine.url)  # traces kept too: the store is unaffected
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    assert "5555" in answer.stdout
    notices = [line for line in answer.stderr.splitlines() if "not being exported" in line]
    assert len(notices) == 1, answer.stderr
    assert "Traceback" not in answer.stderr
    assert len(listed()) == 1


def _attributes_of(span: dict[str, object]) -> dict[str, object]:
    """OTLP attributes as plain values (``intValue`` as int)."""
    found: dict[str, object] = {}
    for item in span.get("attributes", []):  # type: ignore[attr-defined]
        value = item["value"]
        if "intValue" in value:
            found[item["key"]] = int(value["intValue"])
        elif "arrayValue" in value:
            found[item["key"]] = [next(iter(v.values())) for v in value["arrayValue"]["values"]]
        else:
            found[item["key"]] = next(iter(value.values()))
    return found


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_the_export_is_valid_otlp_with_the_genai_attributes(
    jarvis_home: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    """What jarvis sends is an ``ExportTraceServiceRequest`` as the official
    ``opentelemetry-proto`` messages parse it: protobuf bytes decoded by the receiver, or the
    JSON parsed into the message by ``json_format`` (every field checked against the schema)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from jarvis.adapters.otlp_http.protobuf import base64_ids
    from tests.support.otlp_receiver import OtlpReceiver

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    with OtlpReceiver() as receiver, ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url, f'[otel]\nendpoint = "{receiver.endpoint}"\n')
        answer = ask_orchestrator()
    assert answer.returncode == 0, answer.stderr
    wanted = "application/x-protobuf" if protocol == "http/protobuf" else "application/json"
    assert receiver.content_types == [wanted]
    if protocol == "http/json":  # the JSON fits the schema, field by field
        message = json_format.ParseDict(
            base64_ids(receiver.requests[0]),  # type: ignore[arg-type]
            ExportTraceServiceRequest(),
        )
        assert len(message.resource_spans[0].scope_spans[0].spans) == 5
        assert all(len(s.trace_id) == 16 for s in message.resource_spans[0].scope_spans[0].spans)
    spans = receiver.spans()
    attributes = [_attributes_of(s) for s in spans]
    assert [a["gen_ai.operation.name"] for a in attributes] == [
        "invoke_agent",
        "chat",
        "execute_tool",
        "execute_tool",
        "chat",
    ]
    assert attributes[0]["gen_ai.agent.name"] == "orchestrator"
    for chat in (attributes[1], attributes[4]):
        assert chat["gen_ai.request.model"] == MODEL
        assert isinstance(chat["gen_ai.usage.input_tokens"], int)
        assert chat["gen_ai.usage.input_tokens"] > 0
        assert isinstance(chat["gen_ai.usage.output_tokens"], int)
        assert chat["gen_ai.usage.output_tokens"] > 0
    assert [attributes[2]["gen_ai.tool.name"], attributes[3]["gen_ai.tool.name"]] == [
        "calculator",
        "think",
    ]
    assert len({s["traceId"] for s in spans}) == 1
    assert all(s["parentSpanId"] == spans[0]["spanId"] for s in spans[1:])
    assert all(
        s["status"] == {"code": "STATUS_CODE_OK"} or s["status"] == {"code": 1} for s in spans
    )
    assert SECRET_EXPRESSION not in json.dumps(receiver.requests)  # content stays out


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_no_opentelemetry_module_is_imported_unless_protobuf_is_asked_for(
    jarvis_home: Path, protocol: str
) -> None:
    from tests.support.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver, ScriptedEngine(two_tool_calls()) as engine:
        configure(
            jarvis_home,
            engine.url,
            f'[otel]\nendpoint = "{receiver.endpoint}"\nprotocol = "{protocol}"\n',
        )
        command = ["ask", "-a", "orchestrator", "--tools", "calculator,think", "What is it?"]
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "jarvis", *command],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
            env=os.environ.copy(),
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(receiver.spans()) == 5  # exported either way
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    otel = {name for name in imported if name.startswith(("opentelemetry", "google.protobuf"))}
    if protocol == "http/json":
        assert not otel
    else:  # the check sees them when they are imported
        assert "opentelemetry.proto.collector.trace.v1.trace_service_pb2" in otel


@pytest.mark.parametrize("cut", [1, 5, 13])
def test_a_url_the_content_limit_cuts_is_masked_all_the_same(jarvis_home: Path, cut: int) -> None:
    """A question whose URL the 4,000-character limit cuts inside its password (``cut``
    characters into it), before the ``@`` a masker looks for: nothing of the credentials is
    kept."""
    url = " http://admin:Hunter2Secret@db.internal/x"
    question = "x" * (4000 - len(" http://admin:") - cut) + url
    with ScriptedEngine([Reply("Noted.")]) as engine:
        configure(jarvis_home, engine.url, "enabled = true\ncontent = true\n")
        answer = jarvis("ask", "--no-keep", question)
    assert answer.returncode == 0, answer.stderr
    (summary,) = listed()
    spans = shown(str(summary["id"]))["spans"]
    assert isinstance(spans, list)
    kept = spans[0]["content"]["input"]
    assert kept == "x" * (4000 - len(" http://admin:") - cut) + " http://***"
    db = b"".join(p.read_bytes() for p in jarvis_home.glob("traces.db*"))
    assert b"admin:" not in db


def test_a_lone_surrogate_sent_to_jarvis_serve_cannot_keep_a_run_out_of_the_traces(
    jarvis_home: Path,
) -> None:
    """A client's question with a lone surrogate (JSON's ``\\ud800``, which no UTF-8 store
    can hold) is recorded every time, the surrogate as U+FFFD. A plain question asked last
    says when the writer (which keeps the order) has written the two before it."""
    import time

    import httpx

    from tests.support.serve_process import jarvis_serve

    def body(content: str) -> bytes:
        return b'{"model": "jarvis/simple", "messages": [{"role": "user", "content": "%s"}]}' % (
            content.encode()
        )

    with ScriptedEngine([Reply("Done.")]) as engine:
        configure(jarvis_home, engine.url, "enabled = true\ncontent = true\n")
        with jarvis_serve() as served:
            for content in ("run rm -rf \\ud800", "and \\udfff again", "plain"):
                reply = httpx.post(
                    served.url + "/v1/chat/completions",
                    content=body(content),
                    headers={"content-type": "application/json"},
                    timeout=60,
                )
                assert reply.status_code == 200, reply.text
            deadline = time.monotonic() + 60
            while "plain" not in _inputs():
                assert time.monotonic() < deadline, "the plain question was never recorded"
                time.sleep(0.05)
        _, rest = served.process.communicate()
    assert "could not be recorded" not in rest.decode(), rest
    assert sorted(_inputs()) == ["and \ufffd again", "plain", "run rm -rf \ufffd"]


def _inputs() -> list[str]:
    """The input kept in each recorded run's span."""
    found: list[str] = []
    for summary in listed():
        spans = shown(str(summary["id"]))["spans"]
        assert isinstance(spans, list)
        found.append(str(spans[0]["content"].get("input")))
    return found


def _damaged_record(field: str, value: str) -> str:
    """A stored record whose run (or first span) has ``value`` (JSON text) as ``field``."""
    from contracts.trace_store_contract import make_trace
    from jarvis.domain.traces import trace_to_record

    record = json.loads(trace_to_record(make_trace("d" * 32, start=time_now())))
    target = record if not field.startswith("span.") else record["spans"][1]
    target[field.removeprefix("span.")] = "VALUE"
    return json.dumps(record).replace('"VALUE"', value)


def time_now() -> float:
    import time

    return time.time() - 60


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start", "1e300"),  # past the year 9999: no date to show
        ("start", "NaN"),
        ("start", "-1e18"),  # before 1970: OTLP's unsigned nanoseconds
        ("duration", "1e300"),
        ("duration", "-1e12"),  # ends before 1970
        ("span.start", "Infinity"),
        ("span.attributes", '{"first_token_seconds": NaN}'),  # --json cannot write it
        ("span.attributes", '{"tokens_in": 1e999}'),
        ("span.content", "[" * 100_000 + "]" * 100_000),  # deeper than Python recurses
    ],
)
def test_a_record_with_times_out_of_range_is_a_damaged_store(
    jarvis_home: Path, field: str, value: str
) -> None:
    """A record the writer would never have kept (written by hand, or damaged): every
    command that reads it exits 7 with one line and prints nothing else (where it printed
    half a list, then an ``OverflowError``, or an OTLP time below zero); a good trace beside
    it is still shown."""
    import sqlite3

    from contracts.trace_store_contract import make_trace
    from jarvis.adapters.sqlite_traces import SqliteTraceStore
    from jarvis.domain.traces import TraceQuery

    configure(jarvis_home, "http://127.0.0.1:9/v1")
    store = SqliteTraceStore(jarvis_home / "traces.db")
    store.save_many([make_trace("d" * 32, start=time_now()), make_trace("g" * 32)])
    assert len(store.list(TraceQuery())) == 2  # read once: the batch is rows now
    store.close()
    with sqlite3.connect(jarvis_home / "traces.db") as db:
        db.execute(
            "UPDATE jarvis_traces SET record = ? WHERE trace_id = ?",
            (_damaged_record(field, value), "d" * 32),
        )
    db.close()
    for command in (
        ["traces", "list"],
        ["traces", "list", "--json"],
        ["traces", "show", "d" * 32],
        ["traces", "show", "--json", "d" * 32],
        ["traces", "export", "d" * 32],
        ["stats"],
        ["stats", "--json", "--since", "1h"],
    ):
        result = jarvis(*command)
        assert result.returncode == 7, (command, result.stdout, result.stderr)
        assert result.stdout == "", command
        assert result.stderr.startswith("jarvis: the trace store cannot be read: "), command
        assert "a trace is damaged" in result.stderr
        assert "Traceback" not in result.stderr
    assert shown("g" * 32)["trace_id"] == "g" * 32


@pytest.mark.parametrize(
    "damage",
    [
        lambda steps: steps[1].__setitem__(2, 9),  # hangs under a span after it
        lambda steps: steps[1].__setitem__(1, "soon"),  # a time that is not a number
        lambda steps: steps.append([1, 0.0, 0, 1, "stop", ""]),  # the run ends twice
        lambda steps: steps.insert(0, [2, 0.0, -1, "engine", "model"]),  # no run first
    ],
)
def test_a_damaged_record_of_steps_is_a_damaged_store(
    jarvis_home: Path, damage: Callable[[list[list[object]]], None]
) -> None:
    """A run is kept as the steps it recorded, read back as spans by every command: one
    whose steps cannot be a run's (damaged, or written by hand) exits 7 with one line."""
    import sqlite3

    with ScriptedEngine(two_tool_calls()) as engine:
        configure(jarvis_home, engine.url)
        assert ask_orchestrator().returncode == 0
    (summary,) = listed()
    with sqlite3.connect(jarvis_home / "traces.db") as db:
        (record,) = db.execute("SELECT record FROM jarvis_traces").fetchone()
        data = json.loads(record)
        assert data["v"] == 2
        damage(data["steps"])
        db.execute("UPDATE jarvis_traces SET record = ?", (json.dumps(data),))
    db.close()
    for command in (["traces", "show", str(summary["id"])], ["traces", "list"], ["stats"]):
        result = jarvis(*command)
        assert result.returncode == 7, (command, result.stdout, result.stderr)
        assert "a trace is damaged" in result.stderr
        assert "Traceback" not in result.stderr


def _in_private_mounts(mounts: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``jarvis ARGS`` in a private mount namespace, after the shell lines ``mounts`` (which
    exit 77 when they cannot mount here: the test then skips); nothing leaks out of it."""
    script = f'{mounts} || exit 77; exec "{sys.executable}" -m jarvis "$@"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *args],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip("cannot make a private mount here: " + done.stderr.strip())
    return done


def _notice_of_a_run(home: Path, folder: Path, mounts: str) -> str:
    """The one notice of an orchestrator run whose traces are kept in ``folder``, after
    ``mounts`` (see :func:`_in_private_mounts`): the run answers all the same, and without
    a traceback."""
    with ScriptedEngine(two_tool_calls()) as engine:
        configure(home, engine.url, f'enabled = true\ndb_path = "{folder / "traces.db"}"\n')
        answer = _in_private_mounts(
            mounts, "ask", "-a", "orchestrator", "--tools", "calculator,think", "What is it?"
        )
    assert answer.returncode == 0, answer.stderr
    assert "5555" in answer.stdout
    assert "Traceback" not in answer.stderr
    notices = [line for line in answer.stderr.splitlines() if "traces are not" in line]
    assert len(notices) == 1, answer.stderr
    return notices[0]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_trace_store_on_a_read_only_filesystem_never_costs_the_answer(
    jarvis_home: Path,
) -> None:
    """A real read-only bind mount (root writes through permission bits, not through it):
    the run answers, one notice on stderr, and the traces kept before are still read."""
    from contracts.trace_store_contract import make_trace
    from jarvis.adapters.sqlite_traces import SqliteTraceStore

    folder = jarvis_home / "kept"
    folder.mkdir()
    store = SqliteTraceStore(folder / "traces.db")
    store.save(make_trace("kept"))
    store.close()
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    read_only = f'mount --bind -o ro "{folder}" "{folder}"'
    assert "readonly database" in _notice_of_a_run(jarvis_home, folder, read_only)
    listing = _in_private_mounts(read_only, "traces", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    assert [trace["id"] for trace in json.loads(listing.stdout)] == ["kept"]
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_trace_store_on_a_full_filesystem_never_costs_the_answer(jarvis_home: Path) -> None:
    """A real full disk: a 256 KiB tmpfs filled before the run, in a private mount
    namespace. The run answers, one notice on stderr."""
    folder = jarvis_home / "full"
    folder.mkdir()
    full = (
        f'mount -t tmpfs -o size=256k tmpfs "{folder}" && '
        f'{{ dd if=/dev/zero of="{folder}/filler" bs=4k 2>/dev/null; true; }}'
    )
    assert "database or disk is full" in _notice_of_a_run(jarvis_home, folder, full)
