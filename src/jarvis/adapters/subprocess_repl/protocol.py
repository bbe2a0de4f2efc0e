"""The messages the host and the REPL worker exchange, one JSON object per line.

Host -> worker: ``setup`` (once, first), ``execute``, ``set_variable``, ``callback_reply``.
Worker -> host: ``ready`` (once, after setup), ``result``, ``variable_set``, and the
callbacks ``llm_query``, ``llm_batch``, ``tool_call`` (each answered by exactly one
``callback_reply`` with the same ``id`` before the worker goes on).

The worker (``worker.py``) cannot import pydantic, so it writes these shapes by hand; the
host validates every line it receives against :data:`WORKER_MESSAGE`, and the JSON Schemas
in ``contracts/schemas/repl/`` are generated from these models (``scripts/export_schemas.py``
rewrites them; a test fails when they drift).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

PROTOCOL_VERSION = 1


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- host -> worker -----------------------------------------------------------------------


class SetupMessage(_Message):
    """Limits and identity the worker applies to itself before running any code."""

    type: Literal["setup"] = "setup"
    protocol_version: int = PROTOCOL_VERSION
    workdir: str
    uid: int | None = Field(default=None, description="throwaway user to drop to (root hosts)")
    gid: int | None = None
    allow_fork: bool = Field(description="code may fork (only inside a PID namespace)")
    sandboxed: bool = Field(
        default=False,
        description="an OS sandbox confines the worker (the audit hook is an extra layer)",
    )
    max_output_chars: int = Field(gt=0)
    cpu_seconds: float = Field(gt=0, description="CPU time of one execution")
    session_cpu_seconds: int = Field(gt=0)
    memory_bytes: int = Field(gt=0)
    file_size_bytes: int = Field(gt=0)
    max_processes: int = Field(gt=0)


class ExecuteRequest(_Message):
    type: Literal["execute"] = "execute"
    id: int
    code: str


class SetVariableRequest(_Message):
    type: Literal["set_variable"] = "set_variable"
    id: int
    name: str
    value: str


class CallbackReply(_Message):
    """The answer to one callback: ``value`` when ``ok``, else ``error``."""

    type: Literal["callback_reply"] = "callback_reply"
    id: int
    ok: bool
    value: str | list[str] | None = None
    error: str | None = None


HostMessage: TypeAlias = Annotated[
    SetupMessage | ExecuteRequest | SetVariableRequest | CallbackReply,
    Field(discriminator="type"),
]


# --- worker -> host -----------------------------------------------------------------------


class ReadyMessage(_Message):
    type: Literal["ready"] = "ready"
    protocol_version: int
    pid: int
    uid: int
    python: str


class ResultMessage(_Message):
    """The outcome of one ``execute``: outputs are already cut to ``max_output_chars``."""

    type: Literal["result"] = "result"
    id: int
    stdout: str
    stderr: str
    value: str | None
    error: str | None
    error_kind: (
        Literal["exception", "syntax", "cpu_limit", "memory_limit", "final_var_missing"] | None
    )
    traceback: str
    final: str | None
    truncated: bool
    duration_seconds: float


class VariableSetMessage(_Message):
    type: Literal["variable_set"] = "variable_set"
    id: int
    ok: bool
    error: str | None


class LlmQueryRequest(_Message):
    type: Literal["llm_query"] = "llm_query"
    id: int
    prompt: str


class LlmBatchRequest(_Message):
    type: Literal["llm_batch"] = "llm_batch"
    id: int
    prompts: list[str]


class ToolCallRequest(_Message):
    type: Literal["tool_call"] = "tool_call"
    id: int
    name: str
    arguments: dict[str, JsonValue]


CallbackRequest: TypeAlias = LlmQueryRequest | LlmBatchRequest | ToolCallRequest

WorkerMessage: TypeAlias = Annotated[
    ReadyMessage
    | ResultMessage
    | VariableSetMessage
    | LlmQueryRequest
    | LlmBatchRequest
    | ToolCallRequest,
    Field(discriminator="type"),
]

HOST_MESSAGE: TypeAdapter[HostMessage] = TypeAdapter(HostMessage)
WORKER_MESSAGE: TypeAdapter[WorkerMessage] = TypeAdapter(WorkerMessage)


def _type_required(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Mark ``type`` required in every message: it is the discriminator, always sent (the
    models only give it a default so that Python code need not repeat it)."""
    definitions = schema.get("$defs")
    if isinstance(definitions, dict):
        for definition in definitions.values():
            if not isinstance(definition, dict):
                continue
            properties = definition.get("properties")
            required = definition.setdefault("required", [])
            typed = isinstance(properties, dict) and "type" in properties
            if typed and isinstance(required, list) and "type" not in required:
                required.insert(0, "type")
    return schema


def schemas() -> dict[str, dict[str, JsonValue]]:
    """The JSON Schemas of both directions, by file name under ``contracts/schemas/repl/``."""
    return {
        "host_to_worker.schema.json": _type_required(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": "jarvis REPL protocol: host to worker",
                **HOST_MESSAGE.json_schema(),
            }
        ),
        "worker_to_host.schema.json": _type_required(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": "jarvis REPL protocol: worker to host",
                **WORKER_MESSAGE.json_schema(),
            }
        ),
    }
