"""``POST /v1/messages`` (and ``/count_tokens``): Anthropic's Messages API on your engine.

Claude Code, the Claude Agent SDK and the ``anthropic`` SDKs talk to the engine jarvis
runs (``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``). The server is a translating proxy: the
client's system prompt, messages and tools go to the engine in one inference, and the
model's text and tool calls come back as Anthropic content blocks (``tool_use`` with the
parsed ``input``), streamed as Anthropic's events with ``stream``. The client runs the
tools and its loop, as it does against Anthropic.

``model``: a model the engine lists is used as is; ``jarvis/<agent key>`` puts that agent's
system prompt (and persona) before the client's; any other name (``claude-sonnet-4-5``...)
runs the server's default model and is echoed back. ``max_tokens`` is capped at the
server's ``max_output_tokens``.
"""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import Response

from jarvis.application.ask import AskQuestion, AskService
from jarvis.domain.llm.completion import Completion, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.entrypoints.http import events as ev
from jarvis.entrypoints.http.anthropic_frames import STOP, MessageEvents
from jarvis.entrypoints.http.anthropic_wire import (
    CountTokensRequest,
    MessagesRequest,
    estimate_tokens,
    last_is_answerable,
    system_text,
    to_messages,
    to_tool_specs,
)
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.json_body import JSONBody
from jarvis.entrypoints.http.openai_routes import state_of
from jarvis.entrypoints.http.state import ServerState
from jarvis.entrypoints.http.streaming import EventStream, encoded
from jarvis.entrypoints.http.watched import while_connected

router = APIRouter()


async def _engine_model(state: ServerState, service: AskService, requested: str) -> str:
    if state.engine_models is None:
        try:
            state.engine_models = tuple(await service.inference.list_models())
        except Exception:  # the engine answers generations even when it cannot list
            state.engine_models = ()
    if requested in state.engine_models:
        return requested
    return await service.resolve_model(None)


async def build_request(
    state: ServerState, service: AskService, body: MessagesRequest
) -> InferenceRequest:
    messages = to_messages(body, max_chars=state.limits.max_message_chars)
    last_is_answerable(messages)
    system = system_text(body)
    if body.model.startswith("jarvis/"):
        key = body.model.removeprefix("jarvis/")
        if not service.registry.contains(key):
            raise ApiError(
                404, f"No agent named {key[:128]!r}.", "not_found_error", "model_not_found"
            )
        state.policy.check(service.registry, key, {})
        agent, model = await service.build_agent(AskQuestion(question="-", agent=key))
        system = "\n\n".join(p for p in (agent.effective_system_prompt(), system) if p)
    else:
        model = await _engine_model(state, service, body.model)
    specs = to_tool_specs(body.tools)
    choice = body.tool_choice
    tool_choice = "auto"
    if choice is not None:
        if choice.type == "none":
            tool_choice = "none"
        elif choice.type == "any":
            tool_choice = "required"
        elif choice.type == "tool":
            specs = tuple(s for s in specs if s.name == choice.name)
            if not specs:
                raise ApiError(400, f"tool_choice names {choice.name!r}, not among the tools.")
            tool_choice = "required"
    options: dict[str, object] = {}
    if body.top_p is not None:
        options["top_p"] = body.top_p
    temperature = body.temperature
    if temperature is None:
        temperature = service.sampling(AskQuestion(question="-")).temperature
    return InferenceRequest(
        messages=(*((Message.system(system),) if system else ()), *messages),
        model=model,
        temperature=temperature,
        max_tokens=min(body.max_tokens, state.limits.max_output_tokens),
        tools=specs,
        tool_choice=tool_choice,  # type: ignore[arg-type]  # checked against the literals above
        options=options,  # type: ignore[arg-type]  # JSON values, as parsed
    )


def _usage(usage: Usage, estimate: int) -> ev.AnthropicUsage:
    return ev.AnthropicUsage(
        input_tokens=usage.prompt_tokens or estimate, output_tokens=usage.completion_tokens
    )


def _message(
    message_id: str, model: str, completion: Completion, estimate: int
) -> ev.AnthropicMessage:
    blocks: list[ev.TextBlock | ev.ToolUseBlock] = []
    if completion.content or not completion.tool_calls:
        blocks.append(ev.TextBlock(text=completion.content))
    blocks.extend(
        ev.ToolUseBlock(id=c.id, name=c.name, input=c.arguments) for c in completion.tool_calls
    )
    stop = "tool_use" if completion.tool_calls else STOP[completion.finish_reason]
    return ev.AnthropicMessage(
        id=message_id,
        content=blocks,
        model=model,
        stop_reason=stop,  # type: ignore[arg-type]  # mapped to a wire literal
        usage=_usage(completion.usage, estimate),
    )


@router.post(
    "/v1/messages",
    summary="Anthropic Messages over the server's engine",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def messages(body: MessagesRequest, request: Request) -> Response:
    state = state_of(request)
    service = await state.service()
    inference_request = await build_request(state, service, body)
    estimate = estimate_tokens(body)
    message_id = "msg_" + secrets.token_hex(12)
    if body.stream:
        chunks = service.inference.stream(inference_request)
        encoder = MessageEvents(body.model, message_id, estimate)
        return EventStream(encoded(state, chunks, encoder))
    completion = await while_connected(
        state, request.scope, request.receive, service.inference.generate(inference_request)
    )
    return JSONBody(_message(message_id, body.model, completion, estimate).model_dump())


@router.post("/v1/messages/count_tokens", summary="An estimate of a request's input tokens")
async def count_tokens(body: CountTokensRequest) -> dict[str, int]:
    return {"input_tokens": estimate_tokens(body)}
