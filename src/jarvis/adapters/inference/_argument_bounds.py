"""Tool schemas with length bounds, for a request whose reply the server will not bound.

llama-cpp-python's server generates a tool call's arguments under a grammar built from the
tool's JSON schema and ignores ``max_tokens`` while it does (its function-calling format
passes none): a string argument can run to the end of the context. Its grammar does honour
``maxLength`` and ``maxItems``, so a request that must be made whole (it cannot be cut off
as a stream can) offers the tools with every string and array of their schemas bounded by
what ``max_tokens`` allows. An honest model is not held back: no reply of ``max_tokens``
tokens is longer than the bound.
"""

from __future__ import annotations

from dataclasses import replace

from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject, JSONValue

CHARS_PER_TOKEN = 8
"""A token is at most this many characters of an argument (real text averages about 4)."""
MAX_DEPTH = 32
"""Schemas nested deeper are left as they are below this depth (a bound on the walk)."""


def with_bounded_arguments(request: InferenceRequest) -> InferenceRequest:
    """``request`` with its tools' strings and arrays bounded by ``max_tokens``."""
    if not request.tools:
        return request
    tokens = max(1, request.max_tokens)
    tools = tuple(
        replace(tool, parameters=bounded_schema(tool.parameters, tokens)) for tool in request.tools
    )
    return replace(request, tools=tools)


def bounded_schema(schema: JSONObject, max_tokens: int) -> JSONObject:
    """A copy of ``schema`` whose strings have a ``maxLength`` and arrays a ``maxItems`` of
    at most what ``max_tokens`` tokens can hold (tighter existing bounds are kept)."""
    bounded = _bounded(schema, max_tokens, 0)
    return bounded if isinstance(bounded, dict) else schema


def _bounded(value: JSONValue, max_tokens: int, depth: int) -> JSONValue:
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, list):
        return [_bounded(item, max_tokens, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    copy: JSONObject = {key: _bounded(item, max_tokens, depth + 1) for key, item in value.items()}
    kinds = value.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "string" in kinds:
        copy["maxLength"] = _tighter(value.get("maxLength"), CHARS_PER_TOKEN * max_tokens)
    if "array" in kinds:
        copy["maxItems"] = _tighter(value.get("maxItems"), max_tokens)
    return copy


def _tighter(existing: JSONValue, bound: int) -> int:
    if isinstance(existing, int) and not isinstance(existing, bool) and 0 <= existing < bound:
        return existing
    return bound
