"""``response_format`` on ``POST /v1/chat/completions``: the typed answer an agent run gives.

``json_schema`` asks for an object matching the schema, ``json_object`` for any JSON
object, ``text`` (or nothing) for free text. The answer is checked and, when invalid, sent
back to the model with its errors (see :mod:`jarvis.domain.loop.typed_answer`); a schema
jarvis cannot honour is a 400 naming why, an answer that never matches a 502
``output_validation_failed``. With client tools (the proxy) the format goes to the engine
as it is, alongside the tools.
"""

from __future__ import annotations

from jarvis.domain.json_types import JSONValue
from jarvis.domain.llm.completion import ResponseFormat
from jarvis.domain.typed_output import OutputSchema, OutputSpec, SchemaParser, schema_spec
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.openai_wire import ResponseFormatIn

ANY_OBJECT: dict[str, JSONValue] = {"type": "object"}


def output_for(requested: ResponseFormatIn | None) -> OutputSpec[JSONValue] | None:
    """The typed answer ``requested`` asks for (``None``: free text)."""
    if requested is None or requested.type == "text":
        return None
    if requested.type == "json_object":
        return schema_spec(ANY_OBJECT)
    spec = requested.json_schema
    if spec is None or spec.schema_ is None:
        raise ApiError(400, "response_format json_schema needs json_schema.schema.")
    checked = OutputSchema.of(dict(spec.schema_), name=spec.name)
    return OutputSpec(schema=checked, parser=SchemaParser(checked))


def engine_format(requested: ResponseFormatIn | None) -> ResponseFormat | None:
    """The format a proxied inference sends to the engine as it is."""
    spec = output_for(requested)
    return None if spec is None else spec.schema.response_format()
