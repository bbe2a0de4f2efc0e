"""Reading engine error bodies: the message inside, and what kind of failure it names.

Engines report the same failures in different words; these markers are the union of what
OpenAI, vLLM, llama.cpp and Ollama say, so each adapter can raise the one typed error of
:mod:`jarvis.domain.errors` instead of a bare HTTP status.
"""

from __future__ import annotations

from jarvis.adapters.inference._json import as_object, get_object, get_str, loads

CONTEXT_OVERFLOW_MARKERS = (
    "context length",
    "context_length_exceeded",
    "maximum context",
    "maximum_context",
    "context window",
    "exceeds the available context",
    "exceed context window",
    "prompt is too long",
    "input length exceeds",
    "too many tokens",
)

_MAX_MESSAGE = 500


def error_message(body: str) -> str:
    """The human message of an error body (OpenAI, FastAPI and Ollama shapes), shortened."""
    text = body.strip()
    try:
        data = as_object(loads(text)) if text else None
    except ValueError:
        data = None
    if data is not None:
        nested = get_object(data, "error")
        if nested is not None and get_str(nested, "message"):
            text = get_str(nested, "message") or text
        elif get_str(data, "error"):
            text = get_str(data, "error") or text
        elif get_str(data, "message"):
            text = get_str(data, "message") or text
        elif get_str(data, "detail"):
            text = get_str(data, "detail") or text
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def is_context_overflow(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in CONTEXT_OVERFLOW_MARKERS)


def mentions_tools(text: str) -> bool:
    lowered = text.lower()
    return "tool" in lowered or "function call" in lowered or "function_call" in lowered


def mentions_missing_model(text: str) -> bool:
    lowered = text.lower()
    return "model" in lowered and (
        "not found" in lowered
        or "does not exist" in lowered
        or "model_not_found" in lowered
        or "no such model" in lowered
        or "unknown model" in lowered
    )
