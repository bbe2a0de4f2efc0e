"""The openhands runner: one task for the openhands SDK, read as JSON on stdin.

This file is run *as a file* by a Python 3.12+ interpreter that has ``openhands-sdk`` and
``openhands-tools`` installed (jarvis itself may run on 3.11, where the SDK cannot be
installed). It imports nothing from jarvis and only the standard library at module level;
openhands is imported inside :func:`run`, after the environment is made private and
offline. The protocol, one process per task:

* stdin: one JSON object (``prompt``, ``workspace``, ``model``, ``base_url``, ``api_key``,
  ``system_prompt``, ``conversation_id`` to continue or ``""``, ``persistence_dir``,
  ``max_iterations``, ``mode`` ``build`` | ``plan``, ``timeout``);
* stdout: JSON lines, one event each (``session``, ``text_delta``, ``tool_action``,
  ``tool_result``), then the final JSON object alone between the
  ``---OPENJARVIS_OUTPUT_START---`` and ``---OPENJARVIS_OUTPUT_END---`` lines.

Anything else that writes to file descriptor 1 (a library's banner, a stray ``print``) is
sent to stderr instead, so stdout carries the protocol only. Exit status: 0 when the
result is not an error, 1 when it is, 2 when the request itself is unreadable.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import IO

START = "---OPENJARVIS_OUTPUT_START---"
END = "---OPENJARVIS_OUTPUT_END---"
MAX_REQUEST = 4 * 1_048_576
MAX_TOOL_OUTPUT = 20_000
MAX_ERROR = 2_000

_OFFLINE_ENV = {
    # litellm fetches its model cost map from GitHub at import unless told not to
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "OPENHANDS_SUPPRESS_BANNER": "1",
    "DISABLE_TELEMETRY": "1",
    "LOG_TO_FILE": "false",
    "LOG_LEVEL": "WARNING",
}


class Emitter:
    """Writes protocol lines; the SDK calls back from worker threads, hence the lock."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: object) -> None:
        self._write(json.dumps({"type": kind, **fields}) + "\n")

    def final(self, result: dict[str, object]) -> None:
        self._write(f"{START}\n{json.dumps(result)}\n{END}\n")

    def _write(self, text: str) -> None:
        with self._lock:
            self._stream.write(text)
            self._stream.flush()


def _text(value: object, limit: int = MAX_TOOL_OUTPUT) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[:limit]


def read_request(raw: bytes) -> dict[str, object]:
    """The request, checked: a JSON object with the fields :func:`run` needs."""
    if len(raw) > MAX_REQUEST:
        raise ValueError(f"the request is larger than {MAX_REQUEST} bytes")
    request = json.loads(raw.decode("utf-8"))
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    for name in ("prompt", "workspace", "model", "base_url", "persistence_dir"):
        if not isinstance(request.get(name), str) or not request[name]:
            raise ValueError(f"the request has no '{name}'")
    if request.get("mode", "build") not in ("build", "plan"):
        raise ValueError("mode must be build or plan")
    conversation = request.get("conversation_id") or ""
    if not isinstance(conversation, str):
        raise ValueError("conversation_id must be a string")
    if conversation:
        uuid.UUID(hex=conversation)  # ValueError when it is not one
    return request


def private_environment(persistence_dir: str) -> None:
    """Offline and private before anything of openhands or litellm is imported."""
    os.environ.update(_OFFLINE_ENV)
    # a local model has no price in litellm's table: not worth a warning per call
    warnings.filterwarnings("ignore", message="Cost calculation failed")
    os.environ["OH_PERSISTENCE_DIR"] = persistence_dir


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def _tools(mode: str) -> list[object]:
    """``build``: a terminal (plain subprocess, no tmux) and the file editor. ``plan``:
    read-only search (glob and grep), nothing that writes or runs commands."""
    from openhands.sdk import Tool  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only

    if mode == "plan":
        from openhands.tools.glob import GlobTool  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only
        from openhands.tools.grep import GrepTool  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only

        return [Tool(name=GlobTool.name), Tool(name=GrepTool.name)]
    from openhands.tools.file_editor import (  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only
        FileEditorTool,
    )
    from openhands.tools.terminal import (  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only
        TerminalTool,
    )

    return [
        Tool(name=TerminalTool.name, params={"terminal_type": "subprocess"}),
        Tool(name=FileEditorTool.name),
    ]


def _usage(stats: object) -> tuple[int, int, int]:
    """The conversation's (prompt tokens, completion tokens, model calls) so far; the run's
    own figures are the difference across it (a continued conversation carries its past)."""
    try:
        metrics = stats.get_combined_metrics()  # type: ignore[attr-defined]  # the SDK is untyped here
        usage = metrics.accumulated_token_usage
        calls = len(metrics.token_usages or ())
    except Exception:
        return (0, 0, 0)
    if usage is None:
        return (0, 0, calls)
    return (int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), calls)


class Recorder:
    """Turns the conversation's events into protocol events and the run's tool results."""

    def __init__(self, emit: Emitter) -> None:
        self.emit = emit
        self.tool_results: list[dict[str, object]] = []
        self.responses: set[str] = set()
        self.errors: list[str] = []
        self._actions: dict[str, str] = {}

    def on_event(self, event: object) -> None:
        kind = type(event).__name__
        source = getattr(event, "source", "")
        response = getattr(event, "llm_response_id", None)
        if source == "agent" and isinstance(response, str) and response:
            self.responses.add(response)
        if kind == "ActionEvent":
            call_id = _text(getattr(event, "tool_call_id", ""), 200)
            action = getattr(event, "action", None)
            arguments = ""
            if action is not None:
                try:
                    arguments = action.model_dump_json(exclude_none=True)
                except Exception:
                    arguments = ""
            self._actions[call_id] = _text(arguments)
            name = _text(getattr(event, "tool_name", ""), 200)
            self.emit.event("tool_action", tool_name=name, call_id=call_id, input=arguments)
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            self._observation(kind, event)
        elif kind == "ConversationErrorEvent":
            detail = getattr(event, "detail", "") or getattr(event, "code", "")
            self.errors.append(_text(detail, MAX_ERROR))

    def _observation(self, kind: str, event: object) -> None:
        call_id = _text(getattr(event, "tool_call_id", ""), 200)
        if kind == "ObservationEvent":
            observation = getattr(event, "observation", None)
            content = _text(getattr(observation, "text", ""))
            success = not bool(getattr(observation, "is_error", False))
        elif kind == "AgentErrorEvent":
            content, success = _text(getattr(event, "error", "")), False
        else:
            content, success = _text(getattr(event, "rejection_reason", "")), False
        result: dict[str, object] = {
            "tool_name": _text(getattr(event, "tool_name", ""), 200) or "tool",
            "call_id": call_id,
            "content": content,
            "success": success,
            "input": self._actions.get(call_id, ""),
        }
        self.tool_results.append(result)
        self.emit.event("tool_result", **result)

    def on_token(self, chunk: object) -> None:
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            text = getattr(delta, "content", None)
            if isinstance(text, str) and text:
                self.emit.event("text_delta", text=text)


def run(request: dict[str, object], emit: Emitter) -> dict[str, object]:
    """One task: build the agent, continue or start the conversation, run it to its end."""
    from openhands.sdk import (  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only
        LLM,
        Agent,
        AgentContext,
        Conversation,
    )
    from openhands.sdk.conversation.response_utils import (  # type: ignore[import-not-found, unused-ignore]  # SDK: runner venv only
        get_agent_final_response,
    )
    from pydantic import SecretStr

    mode = str(request.get("mode") or "build")
    timeout = _number(request.get("timeout"), 600.0)
    llm = LLM(
        model=f"openai/{request['model']}",
        base_url=str(request["base_url"]),
        api_key=SecretStr(str(request.get("api_key") or "jarvis-local")),
        usage_id="agent",
        num_retries=0,
        reasoning_effort=None,
        # plain-string message content: every OpenAI-compatible server takes it (llama.cpp's
        # Python server refuses the list-of-parts form for some roles)
        force_string_serializer=True,
        stream=True,
        timeout=int(timeout),
    )
    system_prompt = str(request.get("system_prompt") or "")
    context = AgentContext(system_message_suffix=system_prompt) if system_prompt else None
    agent = Agent(llm=llm, tools=_tools(mode), agent_context=context)
    recorder = Recorder(emit)
    conversation_hex = str(request.get("conversation_id") or "")
    conversation_id = uuid.UUID(hex=conversation_hex) if conversation_hex else uuid.uuid4()
    callback: Callable[[object], None] = recorder.on_event
    conversation = Conversation(
        agent=agent,
        workspace=str(request["workspace"]),
        persistence_dir=str(request["persistence_dir"]),
        conversation_id=conversation_id,
        callbacks=[callback],
        token_callbacks=[recorder.on_token],
        max_iteration_per_run=int(_number(request.get("max_iterations"), 50)),
        visualizer=None,
        delete_on_close=False,
    )
    session = conversation.id.hex
    emit.event("session", session_id=session)
    before = _usage(conversation.conversation_stats)
    try:
        conversation.send_message(str(request["prompt"]))
        conversation.run()
        status = str(getattr(conversation.state.execution_status, "value", ""))
        content = get_agent_final_response(conversation.state.events)
        after = _usage(conversation.conversation_stats)
    finally:
        conversation.close()
    error = "; ".join(recorder.errors)
    is_error = status in ("error", "stuck") or bool(error)
    if status == "stuck" and not error:
        error = "the agent got stuck repeating itself"
    return {
        "content": content if isinstance(content, str) else "",
        "session_id": session,
        "status": status,
        "turns": max(1, after[2] - before[2], len(recorder.responses)),
        "usage": {
            "prompt_tokens": max(0, after[0] - before[0]),
            "completion_tokens": max(0, after[1] - before[1]),
        },
        "tool_results": recorder.tool_results,
        "is_error": is_error,
        "error": error[:MAX_ERROR],
    }


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever else prints to stdout goes to stderr
    sys.stdout = sys.stderr
    emit = Emitter(protocol)
    try:
        request = read_request(sys.stdin.buffer.read(MAX_REQUEST + 1))
    except (ValueError, UnicodeDecodeError) as exc:
        emit.final({"is_error": True, "error": f"bad request: {exc}"[:MAX_ERROR]})
        return 2
    private_environment(str(request["persistence_dir"]))
    try:
        result = run(request, emit)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        result = {"is_error": True, "error": message[:MAX_ERROR], "content": ""}
    emit.final(result)
    return 1 if result.get("is_error") else 0


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    # the conversation is closed and persisted, the result written: skip the interpreter's
    # teardown (the SDK's and litellm's exit hooks cost ~1 s and can do nothing useful now)
    os._exit(status)
