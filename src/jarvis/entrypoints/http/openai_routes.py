"""``POST /v1/chat/completions`` and ``GET /v1/models``: any OpenAI client talks to jarvis.

``model`` names the agent: ``jarvis/<agent key>`` (``jarvis/orchestrator``, ``jarvis/react``)
runs that agent of the registry with the server's defaults; a managed agent's id runs its
definition (model, system prompt, tools, persona, sampling, max_turns) without its stored
conversation (a chat-completions client sends the whole conversation every time).

Without client ``tools`` the **agent runs**: the last message is the question, the ones
before it the conversation, and the agent's own tool loop (its server-side tools) runs to
the final answer, which is returned (streamed token by token with ``stream``).

With client ``tools`` the server is a **proxy to the engine**: one inference with the
agent's system prompt (template, ``system_prompt``, persona) followed by the client's own
system messages, the client's messages and the client's tools; the model's ``tool_calls``
are returned to the client in OpenAI's shape for it to execute, and its ``tool`` messages
carry the results into the next request. The agent's loop and server-side tools are not
used then: the client owns the tools, so it owns the loop.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import Response

from jarvis.application.ask import AskQuestion, AskService
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.managed_agents import check_agent_id
from jarvis.domain.run.contract import AgentContext
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.json_body import JSONBody, utf8
from jarvis.entrypoints.http.openai_frames import (
    FINISH,
    AgentChunks,
    ProxyChunks,
    finish_for,
    usage_out,
)
from jarvis.entrypoints.http.openai_wire import (
    ChatRequest,
    NamedToolChoice,
    split_question,
    to_messages,
    to_tool_specs,
    tool_call_out,
)
from jarvis.entrypoints.http.response_format import engine_format, output_for
from jarvis.entrypoints.http.security import Receive, Scope
from jarvis.entrypoints.http.state import ServerState
from jarvis.entrypoints.http.streaming import EventStream, encoded
from jarvis.entrypoints.http.watched import while_connected

router = APIRouter()


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.jarvis
    return state


async def command_for(
    state: ServerState,
    service: AskService,
    body: ChatRequest,
    question: str,
    history: tuple[Message, ...],
) -> AskQuestion:
    """The question for the agent ``body.model`` names (404 when none), its output capped
    at the server's ``max_output_tokens`` (see :func:`capped`)."""
    cap = state.limits.max_output_tokens
    max_tokens = body.max_completion_tokens or body.max_tokens
    managed = state.managed
    context = AgentContext(conversation=history) if history else None
    if body.model.startswith("jarvis/"):
        key = body.model.removeprefix("jarvis/")
        if not service.registry.contains(key):
            raise _unknown_model(body.model)
        state.policy.check(service.registry, key, {})
        return AskQuestion(  # built once, capped (a dataclass's replace costs as much again)
            question=question,
            agent=key,
            temperature=body.temperature,  # unset: AskService applies the [agent] defaults
            max_tokens=_capped_tokens(service, key, max_tokens, cap),
            context=context,
        )
    try:
        agent_id = check_agent_id(body.model)
    except ConfigurationError:
        raise _unknown_model(body.model) from None
    agent = await managed.agents.get(agent_id)
    if agent is None:
        raise _unknown_model(body.model)
    state.policy.check(service.registry, agent.agent, agent.agent_options)
    command = managed.question(agent, question, history)
    if body.temperature is not None:
        command = replace(command, temperature=body.temperature)
    if max_tokens is not None:
        command = replace(command, max_tokens=max_tokens)
    return capped(service, command, cap)


def capped(service: AskService, command: AskQuestion, cap: int) -> AskQuestion:
    """``command`` asking the engine for at most ``cap`` tokens: what the client asked for
    (``max_tokens`` / ``max_completion_tokens``), else the managed agent's, else ``[agent]
    max_tokens``, else the agent's own default, clamped to ``cap`` (as ``/v1/messages``
    clamps its ``max_tokens``); none of them set asks for ``cap``."""
    wanted = _capped_tokens(service, command.agent, command.max_tokens, cap)
    return command if wanted == command.max_tokens else replace(command, max_tokens=wanted)


def _capped_tokens(
    service: AskService, agent: str | None, asked: int | None, cap: int
) -> int | None:
    """The ``max_tokens`` of :func:`capped`: ``asked`` when it is set and within ``cap``,
    else unset when the defaults are within ``cap``, else ``cap``."""
    wanted = asked
    if wanted is None:
        wanted = service.default_max_tokens
    if wanted is None:
        key = service.registry.resolve(agent or service.default_agent)
        wanted = service.registry.get(key).default_sampling.max_tokens
    if wanted is not None and wanted <= cap:
        return asked
    return cap


def _unknown_model(model: str) -> ApiError:
    return ApiError(
        404,
        f"No agent named {model[:256]!r}: use jarvis/<agent key> (GET "
        "/v1/models lists them) or a managed agent's id.",
        "not_found_error",
        "model_not_found",
    )


@router.get("/v1/models", summary="The agents, as OpenAI models")
async def list_models(request: Request) -> dict[str, object]:
    state = state_of(request)
    service = await state.service()
    data: list[dict[str, object]] = [
        {"id": f"jarvis/{key}", "object": "model", "created": 0, "owned_by": "jarvis"}
        for key in service.registry.keys()  # noqa: SIM118  # names only, nothing loaded
        if state.policy.offered(service.registry, key)
    ]
    data.extend(
        {
            "id": a.id,
            "object": "model",
            "created": a.created_us // 1_000_000,
            "owned_by": "jarvis-managed-agent",
        }
        for a in await state.managed.all()
    )
    return {"object": "list", "data": data}


@router.post(
    "/v1/chat/completions",
    summary="OpenAI Chat Completions over a jarvis agent",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def chat_completions(body: ChatRequest, request: Request) -> Response:
    return await complete(state_of(request), body, request.scope, request.receive)


async def complete(
    state: ServerState, body: ChatRequest, scope: Scope, receive: Receive
) -> Response:
    """The whole of ``POST /v1/chat/completions`` once its body is validated. FastAPI's
    route above and the fast path in front of FastAPI (:mod:`.fast_path`) both answer
    through it, so the two cannot answer differently. ``receive`` (the body already read)
    says when the client leaves: a non-streamed run is cancelled then."""
    limits = state.limits
    messages = to_messages(body.messages, max_chars=limits.max_message_chars)
    service = await state.service()
    if body.tools:
        return await _proxy(state, service, body, messages, scope, receive)
    question, history = split_question(messages)
    command = await command_for(state, service, body, question, history)
    output = output_for(body.response_format)
    if output is not None:
        command = replace(command, output=output)
    reply_id = "chatcmpl-" + secrets.token_hex(12)
    if body.stream:
        return EventStream(
            encoded(state, service.stream(command), AgentChunks(body.model, reply_id))
        )
    answer = await while_connected(state, scope, receive, service.ask(command))
    return Response(
        completion_json(reply_id, body.model, answer.content, finish_for(answer), answer.usage),
        media_type="application/json",
    )


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
"""JSON as Starlette's ``JSONResponse`` writes it (UTF-8 as is, no spaces)."""


def completion_json(reply_id: str, model: str, content: str, finish: str, usage: Usage) -> bytes:
    """The body of a ``chat.completion`` without tool calls: the JSON :func:`_completion`
    gives ``JSONResponse``, written from a template. The encoder's walk over the nested
    dict cost the server more than the rest of writing the reply (about 2 us of 4)."""
    return utf8(
        f'{{"id":{_encode(reply_id)},"object":"chat.completion","created":{int(time.time())},'
        f'"model":{_encode(model)},"choices":[{{"index":0,"message":{{"role":"assistant",'
        f'"content":{_encode(content)}}},"finish_reason":{_encode(finish)},"logprobs":null}}],'
        f'"usage":{{"prompt_tokens":{usage.prompt_tokens:d},"completion_tokens":'
        f'{usage.completion_tokens:d},"total_tokens":{usage.total_tokens:d}}}}}'
    )


def _completion(
    reply_id: str, model: str, content: str, calls: tuple[object, ...], finish: str, usage: Usage
) -> dict[str, object]:
    message: dict[str, object] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage_out(usage),
    }


async def _proxy(
    state: ServerState,
    service: AskService,
    body: ChatRequest,
    messages: list[Message],
    scope: Scope,
    receive: Receive,
) -> Response:
    """One inference with the agent's system prompt and the client's tools."""
    if not messages or messages[-1].role not in (Role.USER, Role.TOOL):
        raise ApiError(400, "The last message must be the user's or a tool result.")
    first_user = next((m.content for m in messages if m.role is Role.USER), "")
    command = await command_for(state, service, body, first_user or "-", ())
    key = service.registry.resolve(command.agent or service.default_agent)
    if getattr(service.registry.get(key), "wraps_agent", False):
        raise ApiError(400, "Client tools cannot be proxied through the sandboxed agent.")
    agent, _model = await service.build_agent(replace(command, tools=()))
    system = [agent.effective_system_prompt()]
    system.extend(m.content for m in messages if m.role is Role.SYSTEM and m.content.strip())
    rest = [m for m in messages if m.role is not Role.SYSTEM]
    specs = to_tool_specs(body.tools or [])
    choice = body.tool_choice
    if isinstance(choice, NamedToolChoice):
        specs = tuple(s for s in specs if s.name == choice.function.name)
        if not specs:
            raise ApiError(
                400, f"tool_choice names {choice.function.name!r}, which is not among the tools."
            )
    request = replace(
        agent.request([Message.system("\n\n".join(p for p in system if p)), *rest]),
        tools=specs,
        tool_choice="required" if isinstance(choice, NamedToolChoice) else (choice or "auto"),
        response_format=engine_format(body.response_format),
    )
    reply_id = "chatcmpl-" + secrets.token_hex(12)
    if body.stream:
        chunks = service.inference.stream(request)
        return EventStream(encoded(state, chunks, ProxyChunks(body.model, reply_id)))
    completion = await while_connected(state, scope, receive, service.inference.generate(request))
    calls = tuple(tool_call_out(i, c) for i, c in enumerate(completion.tool_calls))
    for call in calls:
        call.pop("index")
    return JSONBody(
        _completion(
            reply_id,
            body.model,
            completion.content,
            calls,
            "tool_calls" if completion.tool_calls else FINISH[completion.finish_reason],
            completion.usage,
        )
    )
